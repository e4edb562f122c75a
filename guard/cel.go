package guard

import "strings"

// expr is a CEL expression. The helpers below parenthesise what they combine, so an expression
// built from them reads as it nests.
type expr string

// anyOf is true when one of es is.
func anyOf(es ...expr) expr { return join(" || ", es) }

// allOf is true when every one of es is.
func allOf(es ...expr) expr { return join(" && ", es) }

// not is the negation of e.
func not(e expr) expr { return "!(" + e + ")" }

func join(op string, es []expr) expr {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = string(e)
	}
	return expr("(" + strings.Join(parts, op) + ")")
}

// lit is s as a CEL string literal.
func lit(s string) expr { return expr(quote(s)) }

// list is the CEL list of the string literals ss.
func list(ss ...string) expr {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = quote(s)
	}
	return expr("[" + strings.Join(parts, ", ") + "]")
}

// in is whether e is one of ss.
func in(e expr, ss ...string) expr { return e + " in " + list(ss...) }

// eq is whether e equals the string s.
func eq(e expr, s string) expr { return e + " == " + lit(s) }

// field is whether the object o has the (possibly nested) field path, each step tested with
// has() so that a missing one is false rather than an error.
func field(o expr, path ...string) expr {
	steps := make([]expr, len(path))
	cur := o
	for i, p := range path {
		cur = cur + "." + expr(p)
		steps[i] = "has(" + cur + ")"
	}
	return allOf(steps...)
}

// labelIs is whether the object metadata m carries label key with value.
func labelIs(m expr, key, value string) expr {
	return allOf(field(m, "labels"), lit(key)+" in "+m+".labels", eq(m+".labels["+lit(key)+"]", value))
}
