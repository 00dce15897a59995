"""Question: can a table-lookup task encoder, fitted at index build to the transformer on the library's own
texts, come within 1 R@10 point of fp32 transformer tasks over the fit sets (and within 3 on every shared
dataset) in the default skillsight method?

Today's lookup tiers (static-mapped, contextual; docs/ENCODERS.md) lose 6.4-6.6 R@10 points on average
over the fit sets. Here the contextual table (the transformer's token states averaged over the library)
is the starting point and prior, and a correction of it plus per-token pooling weights is fitted so that
lookup-and-pool of a text matches the transformer's vector of that text in the space the scores are
computed in (background removed: q_perp = q - B B^T q, against the index's scored matrix D_perp).

Declared before running.

Student (skillsight_fast/models/fitted.py): a task's vector is normalise(sum_t w_t E_t) over the tokens
the transformer would see ([CLS], the first 254 word pieces, [SEP]), E a (V_seen, d) table in the
background-removed space, w_t = exp(a_t) a learned per-token pooling weight (a = 0: plain mean). Tokens
not in the table are skipped (a task with none: its static-mapped vector, as the contextual tier). Prior
E0: the contextual table, projected; the fit adds lambda * sum_v |E_v - E0_v|^2 + mu * sum_v a_v^2, so a
token seen rarely in training stays near its contextual row. Full-batch Adam in NumPy/SciPy sparse, no
torch; every constant (lambda, mu, tau, steps, learning rate, pieces per skill) fixed once for every
dataset, never tuned per dataset.

Training texts (no evaluation query is ever used): per skill, the name + description (its vector is the
index's name + description vector, no extra pass), the description alone, when_to_use / examples /
triggers, up to three two-sentence windows of the body, and one task-like text made by a fixed template
from the skill's name and description; plus the skill's whole text (its document vector, no extra
pass). Teacher vectors of the new pieces: the int8 task graph (what today's default encodes tasks with).

Arms (each searched by the default skillsight index over fp32 documents; reference: fp32 transformer
tasks, as in experiments/query_encoder_tiers.py):
  - ``transformer-int8``: today's default task encoder (for orientation);
  - ``static-mapped``, ``contextual``: today's lookup tiers;
  - ``fit-cos``: regression, cosine loss to the teacher vector, pooling weights fixed (tokenlearn-style);
  - ``fit-cos+w``: the same with learned pooling weights;
  - ``fit-ctr+w``: contrastive, softmax over the library (the teacher's top 32 documents of the piece
    plus its own skill as the candidates) with the piece's own skill as the label, temperature 0.05,
    learned weights;
  - ``fit-kl+w``: ranking distillation, KL between the teacher's and the student's softmax over the same
    candidates (temperature 0.05), learned weights;
  - ``fit-cos+kl+w``: the sum of the cosine and KL losses, learned weights.
  Optional, if time permits: hashed bigrams; the shallow transformer arm (first 1-2 MiniLM layers).

Measured: R@10 and nDCG@10 of each arm, the paired bootstrap 95% interval of each difference to fp32
transformer tasks (2,000 resamples, seed 0), on skillsbench, sra_theoremqa, bfcl (fit sets) and
metatool (its 2,000-query subset), gorilla_hf; the fit's wall time against the build time of the bundled
library's index (data/skillsbench); encode p50 of short and long tasks.

Adoption rule (issue 29): the best fitted arm becomes the default query encoder if its mean R@10 loss
against fp32 transformer tasks is <= 1 point over the three fit sets and <= 3 points on every shared
dataset, and the fit does not more than double the bundled library's index build time. Otherwise it is
offered as a tier only if it beats today's best lookup tier's mean loss over the fit sets; else dropped.

Result: (added after the run)

Run: python experiments/fitted_query_table.py [--datasets NAME ...] [--json results/fitted_query_table.json]
"""
