"""Shared benchmark text: mixed topics, so windows over it are distinct realistic passages."""

PASSAGE = (
    "Corrective retrieval-augmented generation grades every retrieved passage before it reaches "
    "the generator. Passages judged correct are refined into short strips, ambiguous ones trigger "
    "a rewritten query, and incorrect ones are replaced by a fallback search. The Treaty of "
    "Westphalia, signed in 1648, ended the Thirty Years' War and reshaped the map of Europe. "
    "Photosynthesis converts light energy into chemical energy stored in glucose, releasing "
    "oxygen as a by-product. SQLite keeps a whole database in a single file and is embedded in "
    "billions of devices. Insulin, produced by the pancreas, lowers the concentration of glucose "
    "in the blood. The central bank raised interest rates by a quarter point to curb inflation, "
    "citing strong wage growth and persistent price pressure in services. "
)
