"""Graph reads: entity and link find, expansion, paths between objects and entities, and entity
reads by name."""
