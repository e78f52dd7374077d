"""The benchmarks. Run each as a module from the repository root, e.g.
``.venv/bin/python -m bench.extract``; ``docs/benchmarks.md`` says what each one measures.
"""
