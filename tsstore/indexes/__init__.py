"""Index deployment: the composite indexes a spec needs, and the index file firebase deploys."""
