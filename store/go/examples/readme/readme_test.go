package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docs/c-and-go.md's Go program is this package's main.go, byte for byte,
// and prints what the page says.
func TestTheDocumentedGoProgram(t *testing.T) {
	readme, err := os.ReadFile("../../../../docs/c-and-go.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	at := strings.Index(section, "### A Go program")
	if at < 0 {
		t.Fatal(`docs/c-and-go.md has no "### A Go program" section`)
	}
	section = section[at:]
	open := strings.Index(section, "```go\n")
	if open < 0 {
		t.Fatal("no ```go block in the Go program's section")
	}
	section = section[open+len("```go\n"):]
	block := section[:strings.Index(section, "```\n")]
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(program) {
		t.Fatalf("docs/c-and-go.md's Go program differs from store/go/examples/readme/main.go")
	}

	// Run it, capturing what it prints.
	r, w, _ := os.Pipe()
	stdout, args := os.Stdout, os.Args
	os.Stdout, os.Args = w, []string{"readme", filepath.Join(t.TempDir(), "db")}
	main()
	os.Stdout, os.Args = stdout, args
	w.Close()
	var out bytes.Buffer
	io.Copy(&out, r)
	want := "pod-b requeues: the claim is at revision 3\n" +
		"team-a/trainer-gpus is reserved for pod-a; gpu-3 is held by team-a/trainer-gpus (revision 3)\n"
	if out.String() != want {
		t.Errorf("the program printed:\n%s\nwant:\n%s", out.String(), want)
	}
	// The page quotes the output too.
	if !strings.Contains(string(readme), want) {
		t.Errorf("docs/c-and-go.md does not show the program's output")
	}
}
