"""Environment variables as data: which variables an engine version reads (its registry, read
from source without importing it), their types, defaults and meanings."""
