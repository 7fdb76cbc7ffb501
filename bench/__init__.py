"""The benchmarks (bench/README.md): each runs from the repository's root as
`python -m bench.<name>` and prints its ratios against a baseline measured in the same run."""
