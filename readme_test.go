package koto_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	readmeGoBlock = regexp.MustCompile("(?s)```go\n(.*?)\n```")
	readmeRegion  = regexp.MustCompile(`(?s)// readme: (\w+)\n(.*?)\n// readme: end\n`)
)

// TestREADMESnippets checks that every Go block of README.md is a region of
// example_readme_test.go, which compiles with the tests, and that every
// region is in README.md: a snippet that would not compile, or that drifts
// from the compiled code, fails here.
func TestREADMESnippets(t *testing.T) {
	readme := read(t, "README.md")
	code := read(t, "example_readme_test.go")
	regions := map[string]string{}
	for _, m := range readmeRegion.FindAllStringSubmatch(code, -1) {
		regions[strings.TrimSpace(m[2])] = m[1]
	}
	if len(regions) == 0 {
		t.Fatal("example_readme_test.go has no readme: regions")
	}
	var found []string
	for i, m := range readmeGoBlock.FindAllStringSubmatch(readme, -1) {
		name, ok := regions[strings.TrimSpace(m[1])]
		if !ok {
			t.Errorf("README.md's Go block %d is not a region of example_readme_test.go; copy it there, or from there:\n%s", i+1, m[1])
			continue
		}
		found = append(found, name)
	}
	for _, name := range regions {
		if !slices.Contains(found, name) {
			t.Errorf("region %q of example_readme_test.go is not in README.md", name)
		}
	}
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}
