"""Corrective actions taken after grading: refine strips, expand/rewrite queries, fall back."""
