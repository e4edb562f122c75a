// Package docs tests the documentation as a reader would meet it: every relative link and anchor
// of the README, the root pages, docs/ and internal/safety's findings resolves, an excerpt of a
// golden file still matches the file, and a test a page cites by name is a test of the package it
// names. It has no code of its own.
package docs
