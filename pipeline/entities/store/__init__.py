"""The entity layer's SQL: extraction state, entity writes, resolution reads, merges, name
vectors and curators' decisions."""
