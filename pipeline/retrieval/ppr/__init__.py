"""Personalized PageRank retrieval (`mode: ppr | auto`): query seeds, the walk over the entity
layer (in-memory snapshot or SQL), the PageRank math and the fusion with the hybrid list."""
