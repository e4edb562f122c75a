package convert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	istiosecurityv1 "istio.io/client-go/pkg/apis/security/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeflow-ambient/profile-plugins/authz"
	"github.com/kubeflow-ambient/profile-plugins/cmd/profile-plugins/internal/cli"
	"github.com/kubeflow-ambient/profile-plugins/runner"
)

// Help is the command's --help.
var Help = cli.Help{
	Command: "convert",
	Args:    "[FILE...]",
	Description: `Convert rewrites selector-based AuthorizationPolicies into their ambient form: the same rules
attached with targetRefs to a waypoint Gateway or a Service. It reads YAML (the FILEs, or standard
input without any; several documents and v1 Lists allowed), writes the converted policies on
standard output, and a report on standard error naming, per policy, the rules that only a
waypoint can enforce.

Documents that are not AuthorizationPolicies are refused; policies that already have targetRefs
are reported and left out. A spec field this build's istio.io/api does not know is refused rather
than dropped, since dropping a rule field changes what the policy allows.`,
	Examples: `# Every policy of a namespace, attached to the Service ml-pipeline
kubectl get authorizationpolicies -n kubeflow -o yaml | profile-plugins convert -service ml-pipeline

# Policies from files, attached to the namespace's waypoint, as a JSON List
profile-plugins convert -gateway waypoint -o json policy.yaml more.yaml`,
	ExitStatus: `0  every policy was converted or reported as already ambient
1  bad input (flags, a file, a document that is not a policy, an unknown field); nothing is
   printed on stdout`,
}

// Run runs `profile-plugins convert` with args (the flags and files after "convert") and
// returns the exit status. Without files it reads stdin.
func Run(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Help.Exit(newFlags(&options{}), run(args, stdin, stdout, stderr), stdout, stderr)
}

// options are the command's flags.
type options struct {
	gateway, service, output string
}

func newFlags(o *options) *flag.FlagSet {
	fs := cli.NewFlagSet(Help.Command)
	fs.StringVar(&o.gateway, "gateway", "", "attach to this waypoint Gateway in the policy's namespace")
	fs.StringVar(&o.service, "service", "", "attach to this Service in the policy's namespace")
	fs.StringVar(&o.output, "o", cli.YAML, "output format: yaml, or json (one v1 List)")
	return fs
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var o options
	fs := newFlags(&o)
	if err := Help.Parse(fs, args); err != nil {
		return err
	}
	if (o.gateway == "") == (o.service == "") {
		return cli.UsageError{Err: errors.New("give exactly one of -gateway NAME or -service NAME")}
	}
	if err := cli.CheckFormat(o.output, cli.YAML, cli.JSON); err != nil {
		return cli.UsageError{Err: err}
	}
	target := authz.GatewayTarget(o.gateway)
	if o.service != "" {
		target = authz.ServiceTarget(o.service)
	}

	inputs := map[string]io.Reader{"stdin": stdin}
	names := []string{"stdin"}
	if fs.NArg() > 0 {
		inputs, names = map[string]io.Reader{}, fs.Args()
		for _, name := range names {
			data, err := os.ReadFile(name)
			if err != nil {
				return err
			}
			inputs[name] = bytes.NewReader(data)
		}
	}

	var converted []client.Object
	var report bytes.Buffer
	for _, name := range names {
		docs, err := readDocuments(inputs[name])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for i, doc := range docs {
			pols, err := policies(doc)
			if err != nil {
				return fmt.Errorf("%s: document %d: %w", name, i+1, err)
			}
			for _, in := range pols {
				out, rep, err := authz.ToAmbient(in, target)
				if errors.Is(err, authz.ErrAlreadyAmbient) {
					fmt.Fprintf(&report, "%s: skipped, it has targetRefs already\n", rep.Policy)
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				converted = append(converted, out)
				writeReport(&report, rep)
			}
		}
	}
	out, err := runner.EncodeYAML(runner.NewScheme(), converted...)
	if err == nil && o.output == cli.JSON {
		out, err = cli.JSONList(out)
	}
	if err != nil {
		return err
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	_, err = stderr.Write(report.Bytes())
	return err
}

func readDocuments(r io.Reader) ([][]byte, error) {
	var docs [][]byte
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			docs = append(docs, doc)
		}
	}
}

// policies decodes one document: an AuthorizationPolicy, or a List of them (kubectl get -o yaml).
func policies(doc []byte) ([]*istiosecurityv1.AuthorizationPolicy, error) {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return nil, err
	}
	switch {
	case head.Kind == "List" || head.Kind == "AuthorizationPolicyList":
		var out []*istiosecurityv1.AuthorizationPolicy
		for i, item := range head.Items {
			p, err := policies(item)
			if err != nil {
				return nil, fmt.Errorf("items[%d]: %w", i, err)
			}
			out = append(out, p...)
		}
		return out, nil
	case head.Kind == "AuthorizationPolicy" && strings.HasPrefix(head.APIVersion, "security.istio.io/"):
		p := &istiosecurityv1.AuthorizationPolicy{}
		if err := yaml.UnmarshalStrict(doc, p); err != nil {
			return nil, err
		}
		// Istio's spec decoder skips fields it does not know (say, from a newer Istio). Dropping
		// a rule field silently would change what the policy allows, so refuse instead.
		if lost, err := lostSpecFields(doc, p); err != nil || len(lost) > 0 {
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%s/%s: %s not known to this build's istio.io/api; refusing to drop it", p.Namespace, p.Name, strings.Join(lost, ", "))
		}
		return []*istiosecurityv1.AuthorizationPolicy{p}, nil
	}
	return nil, fmt.Errorf("kind %q (apiVersion %q) is not a security.istio.io AuthorizationPolicy", head.Kind, head.APIVersion)
}

func writeReport(w io.Writer, rep authz.ConversionReport) {
	fmt.Fprintf(w, "%s: converted\n", rep.Policy)
	for _, a := range rep.L7 {
		fmt.Fprintf(w, "  L7, waypoint only: %s\n", a)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// lostSpecFields lists the spec fields of doc that do not survive decoding into p.
func lostSpecFields(doc []byte, p *istiosecurityv1.AuthorizationPolicy) ([]string, error) {
	var orig struct {
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &orig); err != nil {
		return nil, err
	}
	data, err := json.Marshal(&p.Spec)
	if err != nil {
		return nil, err
	}
	var round map[string]any
	if err := json.Unmarshal(data, &round); err != nil {
		return nil, err
	}
	// ALLOW is the action enum's zero value, which protobuf JSON leaves out.
	if orig.Spec["action"] == "ALLOW" {
		delete(orig.Spec, "action")
	}
	var lost []string
	missing(orig.Spec, round, "spec", &lost)
	return lost, nil
}

func missing(orig, round any, path string, lost *[]string) {
	switch o := orig.(type) {
	case map[string]any:
		r, _ := round.(map[string]any)
		for k, v := range o {
			rv, ok := r[k]
			if !ok && !isZero(v) {
				*lost = append(*lost, path+"."+k)
				continue
			}
			missing(v, rv, path+"."+k, lost)
		}
	case []any:
		r, _ := round.([]any)
		for i, v := range o {
			if i < len(r) {
				missing(v, r[i], fmt.Sprintf("%s[%d]", path, i), lost)
			}
		}
	}
}

// isZero is true for values protobuf JSON leaves out: empty lists and maps, "", false, 0.
func isZero(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case []any:
		return len(t) == 0
	case map[string]any:
		return len(t) == 0
	case string:
		return t == ""
	case bool:
		return !t
	case float64:
		return t == 0
	}
	return false
}
