#!/bin/bash
# The dev-set measurements of issue 57: previews of a move at 10 % beside the full move, for MiniLM -> hashing-384, MiniLM -> E5 and E5 -> MiniLM. Usage: bench/preview_devset.sh WORK_FOLDER (about two hours on 2 cores; E5 is the slow part).
set -x
M="${MEMPIPE:-mempipe}"
DATA="$(cd "$(dirname "$0")/../../shared/data/longmemeval-dev" && pwd)"
Q="$DATA/queries.jsonl"
cd "${1:?a work folder}"
printf 'memory:\n  embedding:\n    model: all-MiniLM-L6-v2\n' > project-config.yaml
date
if [ ! -f minilm.db ]; then
  $M backfill "$DATA/turns.jsonl.gz" --format turns --org-id dev --project-id lme --store sqlite:///minilm-build.db > /dev/null
  $M reembed --incremental --collections stm --store sqlite:///minilm-build.db > /dev/null
  mv minilm-build.db minilm.db
fi
date
cp minilm.db hashing.db
for seed in 0 1 2; do
  $M reembed --model hashing-384 --collections stm --preview --sample 3807 --seed $seed --gate $Q --gate-source stm --store sqlite:///minilm.db --json > preview-hashing-$seed.json
done
$M reembed --model hashing-384 --collections stm --gate $Q --gate-source stm --min-recall-ratio 0 --store sqlite:///hashing.db --json > move-hashing.json
date
for seed in 0 1 2; do
  /usr/bin/time -v $M reembed --model multilingual-e5-small --collections stm --preview --sample 3807 --seed $seed --gate $Q --gate-source stm --store sqlite:///minilm.db --json > preview-e5-$seed.json 2> preview-e5-$seed.err
done
date
cp minilm.db e5.db
/usr/bin/time -v $M reembed --model multilingual-e5-small --collections stm --gate $Q --gate-source stm --min-recall-ratio 0 --store sqlite:///e5.db --json > move-e5.json 2> move-e5.err
date
for seed in 0 1 2; do
  $M reembed --model all-MiniLM-L6-v2 --collections stm --preview --sample 3807 --seed $seed --gate $Q --gate-source stm --store sqlite:///e5.db --json > preview-back-$seed.json
done
cp e5.db back.db
$M reembed --model all-MiniLM-L6-v2 --collections stm --gate $Q --gate-source stm --min-recall-ratio 0 --store sqlite:///back.db --json > move-back.json
date
echo done
