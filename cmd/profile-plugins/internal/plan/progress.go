package plan

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// progress draws a bar on a terminal while the plan runs: large clusters take a while. It draws
// nothing when stderr is not a terminal (CI logs, pipes), and a nil *progress is silent.
type progress struct {
	w          io.Writer
	mu         sync.Mutex
	total, pos int
}

// newProgress returns a bar on f, or nil when f is not a terminal.
func newProgress(f *os.File) *progress {
	if !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progress{w: f}
}

func (p *progress) start(total int) {
	if p != nil {
		p.total = total
	}
}

func (p *progress) step(name string) {
	if p == nil || p.total == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pos++
	const width = 30
	done := width * p.pos / p.total
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d %-40.40s", strings.Repeat("=", done), strings.Repeat(" ", width-done), p.pos, p.total, name)
}

func (p *progress) done() {
	if p != nil && p.total > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 80))
	}
}
