// Package report is how the test programs answer the Python tests: what they saw as JSON lines
// on stdout, and an error on stderr with exit status 1.
package report

import (
	"encoding/json"
	"fmt"
	"os"
)

// Check ends the program with err, if there is one.
func Check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// Emit prints value as one JSON line.
func Emit(value interface{}) {
	line, err := json.Marshal(value)
	Check(err)
	fmt.Println(string(line))
}
