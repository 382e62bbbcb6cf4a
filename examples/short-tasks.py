#!/usr/bin/env python3
"""Writes examples/short-tasks.csv, the synthetic batch trace of examples/short-tasks.yaml.

Short tasks of one kind (0.5, 1 or 2 CPUs, 1.5 GiB per CPU) arrive as a Poisson process whose
rate keeps about 88 CPUs busy for the first 45 minutes and about 52 CPUs for the remaining two
hours and a quarter; each runs an exponential time (mean 4 minutes, 30 s to 20 minutes).
Deterministic (seeded): `python3 examples/short-tasks.py > examples/short-tasks.csv`.
"""

import random

SEED = 38
END_S = 3 * 3600
MEAN_S = 240.0
CPUS = [(500, 0.3), (1000, 0.5), (2000, 0.2)]  # millicores, weight
MEAN_CPU = sum(c * w for c, w in CPUS) / 1000.0


def busy_cpus(t):
    """CPUs the arrivals keep busy at second t."""
    return 88.0 if t < 45 * 60 else 52.0


def main():
    rng = random.Random(SEED)
    print("name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority")
    t, n = 0.0, 0
    while True:
        rate = busy_cpus(t) / (MEAN_CPU * MEAN_S)  # tasks per second (Little's law)
        t += rng.expovariate(rate)
        if t >= END_S:
            break
        cpu = rng.choices([c for c, _ in CPUS], weights=[w for _, w in CPUS])[0]
        duration = min(max(int(rng.expovariate(1.0 / MEAN_S)), 30), 1200)
        print(f"task-{n},{int(t)},{duration},{cpu},{cpu * 3 // 2},0,,0")
        n += 1


if __name__ == "__main__":
    main()
