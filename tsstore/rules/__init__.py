"""``firestore.rules`` from the declaration: the block (:mod:`~tsstore.rules.build`) and the file
it is merged into (:mod:`~tsstore.rules.file`)."""
