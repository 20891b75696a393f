"""Writing the answer from the loop's final context, and showing it.

- `generation`: the prompt, the streamed cited answer and its finish reason.
- `attribution`: which passages an uncited answer was drawn from.
- `timing`: where an answer's time goes, as a reader waits for it.
- `views`: the result as every interface shows it (graded hits, sources, verdict).
"""
