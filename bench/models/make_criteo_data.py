"""Write a synthetic Criteo-format CSV: label, I1-I13 (counts, some empty), C1-C26 (hex ids).

    python make_criteo_data.py OUT.csv [--rows N] [--seed S]

No header, like the Criteo files the CTR model zoos read. Categorical values follow a Zipf-like
law over each column's own cardinality, so batches repeat popular ids and touch a long tail, as
real click logs do; the label depends on a few features so a model can learn something.
"""
import argparse

import numpy as np

NUMERIC = 13
CATEGORICAL = 26
# Distinct values per categorical column: one of a million ids, a few of 1e5, most small.
CARDINALITY = [1000000, 300000, 100000, 50000, 50000, 20000, 20000, 10000, 10000, 5000, 5000, 5000,
               2000, 2000, 1000, 1000, 1000, 500, 500, 200, 200, 100, 50, 20, 10, 4]


def categorical(rng, rows, cardinality):
    ranks = np.minimum(rng.zipf(1.2, size=rows), cardinality) - 1
    # Spread ranks over the id space so ids are not small integers.
    return (ranks * 2654435761 + 97) % (2 ** 32)


def write(path, rows, seed):
    rng = np.random.RandomState(seed)
    numeric = rng.poisson(lam=rng.uniform(0.5, 50, size=NUMERIC), size=(rows, NUMERIC))
    missing = rng.uniform(size=(rows, NUMERIC)) < 0.15
    ids = np.stack([categorical(rng, rows, c) for c in CARDINALITY], axis=1)
    score = 0.02 * numeric[:, 0] - 0.01 * numeric[:, 3] + 0.8 * (ids[:, 25] % 4 == 1) + 0.5 * (ids[:, 20] % 7 < 2)
    label = (score + rng.logistic(size=rows) > 1.5).astype(int)
    with open(path, "w") as out:
        for i in range(rows):
            fields = [str(label[i])]
            fields += ["" if missing[i, j] else str(numeric[i, j]) for j in range(NUMERIC)]
            fields += ["%08x" % value for value in ids[i]]
            out.write(",".join(fields) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--rows", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    write(args.out, args.rows, args.seed)


if __name__ == "__main__":
    main()
