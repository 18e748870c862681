package determinism_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/stemflow/stem/determinism"
)

// TestAnalyzer checks the analyzer's findings against the // want comments
// of the packages in testdata/src.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), determinism.Analyzer, "kinds", "clean", "allows", "mapranges")
}
