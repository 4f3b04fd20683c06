"""The dispatcher's decisions, pure: observed state in, a plan out (which workers get copies,
first admitted wins, removal, intake, selection, capacity, what a copy is, the record of runs).
No module here does I/O; import-linter holds them to it (pyproject.toml)."""
