"""The skill library as data: reading skill sources (SKILL.md trees, JSONL, datasets),
task lists, and the index-time prompt-injection screen."""
