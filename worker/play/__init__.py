"""Play: episodes of a policy against an environment, outside training: evaluations, dry runs, learnability, re-scoring, previews."""
