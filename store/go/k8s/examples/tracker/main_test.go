package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/kubernetes.md's program is this package's main.go, byte for byte,
// and prints what the page says.
func TestTheDocumentedProgram(t *testing.T) {
	page, err := os.ReadFile("../../../../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(page)
	at := strings.Index(section, "## A program")
	if at < 0 {
		t.Fatal(`docs/kubernetes.md has no "## A program" section`)
	}
	section = section[at:]
	open := strings.Index(section, "```go\n")
	if open < 0 {
		t.Fatal("no ```go block in the program's section")
	}
	section = section[open+len("```go\n"):]
	block := section[:strings.Index(section, "```\n")]
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(program) {
		t.Fatalf("docs/kubernetes.md's program differs from store/go/k8s/examples/tracker/main.go")
	}

	r, w, _ := os.Pipe()
	stdout, args := os.Stdout, os.Args
	os.Stdout, os.Args = w, []string{"tracker", filepath.Join(t.TempDir(), "db")}
	main()
	os.Stdout, os.Args = stdout, args
	w.Close()
	var out bytes.Buffer
	io.Copy(&out, r)
	want := "gpu-0 taken: true gpu-1 taken: false\n" +
		"after Reserve, gpu-1 taken: true\n" +
		"after Unreserve, gpu-1 taken: false\n" +
		"gpu-0 is held by default/trainer\n"
	if out.String() != want {
		t.Errorf("the program printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if !strings.Contains(string(page), want) {
		t.Errorf("docs/kubernetes.md does not show the program's output")
	}
}
