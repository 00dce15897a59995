"""The search engine: SkillIndex and its stages, the index state and on-disk format, the
dense scans, the lexicon, background statistics, label-free decisions and abstention."""
