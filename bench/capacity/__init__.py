"""`python -m bench.capacity`: what one instance of each component does and what the data occupy
per document, the figures docs/scaling.md's plan for 100M documents is built from."""
