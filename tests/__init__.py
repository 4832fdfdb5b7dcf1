"""bringup's tests, a package: tests/<folder>/ tests bringup/<folder>/ (docs/contributing.md, "A test").

Modules are imported by their package names (tests.conftest, tests.search.search_world, ...), so two
test files of one name in different folders never clash."""
