package runner

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// A condition message up to the limit is kept whole; a longer one is cut at a rune boundary at or
// below the limit, and says how many bytes it lost.
func TestCapMessageCutsOnlyPastTheLimitAndAtARuneBoundary(t *testing.T) {
	t.Parallel()
	exact := strings.Repeat("a", maxConditionMessage)
	assert.Equal(t, exact, capMessage(exact))

	over := exact + "bc"
	assert.Equal(t, exact+" ... (2 more bytes cut)", capMessage(over))

	// "é" is two bytes; the limit falls inside the one that straddles it.
	straddling := strings.Repeat("a", maxConditionMessage-1) + "é" + "tail"
	got := capMessage(straddling)
	assert.True(t, utf8.ValidString(got), "cut inside a rune")
	assert.Equal(t, strings.Repeat("a", maxConditionMessage-1)+" ... (6 more bytes cut)", got)

	// Bytes that start no rune (not UTF-8 at all) are cut to nothing rather than read past.
	junk := strings.Repeat("\x80", maxConditionMessage+1)
	assert.Equal(t, " ... (32001 more bytes cut)", capMessage(junk))
}
