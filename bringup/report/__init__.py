"""The bring-up report: FINDINGS.md and findings.json, and the HTML report."""
