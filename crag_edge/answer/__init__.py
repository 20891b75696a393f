"""Writing the answer from the loop's final context, and showing it.

- `generation`: the prompt, the streamed cited answer and its finish reason.
- `attribution`: which passages an uncited answer was drawn from.
- `timing`: where an answer's time goes, as a reader waits for it.
- `finished`: the answer as `Engine.answer` streams it, then the one `Answer` every face
  renders, and its JSON shape.
- `views`: the result as every interface shows it (graded hits, sources, verdict).
"""
