"""The core types every stage shares: a candidate (one launch configuration), the flags bringup
reserves for itself, and the loader of the knowledge data files."""
