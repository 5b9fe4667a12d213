"""Plant the bugs of issue 23, one at a time, in a COPY of src/, and run the learning checks
(tests/test_learning.py) against each copy: every planted bug must make a check fail.

    python scripts/plant_learning_bugs.py                  # every plant (about 1 min each on one core)
    python scripts/plant_learning_bugs.py --list
    python scripts/plant_learning_bugs.py sign-half-rows old-logps-wrong-rows
    python scripts/plant_learning_bugs.py -k ppo gae-sign   # only the checks pytest's -k selects
    python scripts/plant_learning_bugs.py -k with_each_loss loss-term-sign-half-rows

Nothing in the working tree changes. A plant is a text replacement anchored on one source line;
when a refactor moves that line, the script says which anchor it cannot find (update it here).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name -> (file under src/, the anchor line(s), the planted replacement, what it breaks)
PLANTS = {
    "sign-half-rows": (
        "resrl/core/registry.py", "    return token_adv.float(), dict(stats)",
        "    token_adv = token_adv.clone(); token_adv[: token_adv.shape[0] // 2] *= -1  # PLANT\n"
        "    return token_adv.float(), dict(stats)",
        "the advantage's sign flipped for the first half of the rows (every layout)"),
    "sign-quarter-rows": (
        "resrl/core/registry.py", "    return token_adv.float(), dict(stats)",
        "    token_adv = token_adv.clone(); token_adv[: token_adv.shape[0] // 4] *= -1  # PLANT\n"
        "    return token_adv.float(), dict(stats)",
        "the advantage's sign flipped for the first quarter of the rows (every layout)"),
    "mask-shift-right": (
        "resrl/engines/trl/trainer.py",
        '        return mask * batch["tool_mask"] if batch.get("tool_mask") is not None else mask',
        '        mask = mask * batch["tool_mask"] if batch.get("tool_mask") is not None else mask\n'
        '        shifted = torch.zeros_like(mask); shifted[:, 1:] = mask[:, :-1]  # PLANT\n'
        '        return shifted',
        "the response (loss) mask shifted right by one token: the first token out, one pad in"),
    "mask-shift-left": (
        "resrl/engines/trl/trainer.py",
        '        return mask * batch["tool_mask"] if batch.get("tool_mask") is not None else mask',
        '        mask = mask * batch["tool_mask"] if batch.get("tool_mask") is not None else mask\n'
        '        shifted = torch.zeros_like(mask); shifted[:, :-1] = mask[:, 1:]  # PLANT\n'
        '        return shifted',
        "the response (loss) mask shifted left by one token: each segment's last token out"),
    "step-adv-other-trajectory": (
        "resrl/engines/trl/step_round.py", '        out["advantages"] = adv * mask',
        '        out["advantages"] = adv.roll(2, 0) * mask  # PLANT',
        "step rows paired with another trajectory's advantage (rolled by one 2-step trajectory)"),
    "step-adv-roll1": (
        "resrl/engines/trl/step_round.py", '        out["advantages"] = adv * mask',
        '        out["advantages"] = adv.roll(1, 0) * mask  # PLANT',
        "step rows paired with the previous row's advantage (for 2-step episodes mostly its own "
        "trajectory's other step)"),
    "reward-zero-trl": (
        "resrl/engines/trl/trainer.py",
        '        out["rewards"] = rewards[start:start + B].float()  # NaN: unscorable (every reward function said None)',
        '        out["rewards"] = torch.zeros_like(rewards[start:start + B].float())  # PLANT',
        "the reward not reaching the rows: single-/multi-turn rows' rewards zero"),
    "reward-shuffled-trl": (
        "resrl/engines/trl/trainer.py",
        '        out["rewards"] = rewards[start:start + B].float()  # NaN: unscorable (every reward function said None)',
        '        out["rewards"] = rewards[start:start + B].float().roll(1, 0)'
        '  # PLANT',
        "the reward reaching the wrong rows: single-/multi-turn rewards rolled by one row"),
    "reward-not-on-step-rows": (
        "resrl/engines/steps.py", "            s.episode_reward = ep.reward - invalid_format_penalty * s.invalid_format",
        "            s.episode_reward = 0.0 - invalid_format_penalty * s.invalid_format  # PLANT",
        "the episode reward not reaching the step rows (the step rewards still carry it)"),
    "step-env-reward-lost": (
        "resrl/engines/steps.py", '            r = reward_scale * float(out["reward"])',
        '            r = 0.0 * float(out["reward"])  # PLANT',
        "the environment's reward lost before the step rows (episode and step rewards zero)"),
    "loss-term-sign-half-rows": (
        "resrl/core/loss.py", "    token_loss, term_stats = term.fn(s, cfg)",
        "    token_loss, term_stats = term.fn(s, cfg)\n"
        "    token_loss = token_loss.clone(); token_loss[: token_loss.shape[0] // 2] *= -1  # PLANT",
        "every policy loss's per-token term with the wrong sign on the first half of the rows"),
    "old-logps-wrong-rows": (
        "resrl/engines/trl/trainer.py", '        old = inputs.get("old_per_token_logps")',
        '        old = inputs.get("old_per_token_logps")\n'
        '        old = old.roll(1, 0) if old is not None else None  # PLANT',
        "old log-probs from the wrong rows (rolled by one row in the loss)"),
    # PPO (resrl.core.gae, resrl.engines.trl.critic)
    "gae-reward-late": (
        "resrl/core/gae.py", "    out[has.nonzero(as_tuple=True)[0], last[has]] = rewards.to(torch.float64)[has]",
        "    out[has.nonzero(as_tuple=True)[0], (last[has] + 1).clamp(max=T - 1)] = rewards.to(torch.float64)[has]"
        "  # PLANT",
        "PPO: GAE off by one, the sequence reward on the position after the last valid token"),
    "gae-sign": (
        "resrl/core/gae.py", "    out = (x.to(torch.float64) - mean) * torch.rsqrt(var + WHITEN_EPS)",
        "    out = (mean - x.to(torch.float64)) * torch.rsqrt(var + WHITEN_EPS)  # PLANT",
        "PPO: the whitened advantages' sign flipped (every row)"),
    "gae-chain-breaks-at-env-tokens": (
        "resrl/core/gae.py", "        next_adv = torch.where(valid, a_t, next_adv)",
        "        next_adv = torch.where(valid, a_t, torch.zeros_like(a_t))  # PLANT",
        "PPO: the GAE chain reset at every masked position (multi-turn: no credit across a tool answer)"),
    "critic-token-alignment": (
        "resrl/engines/trl/critic.py", '        return self.head(align_response_hidden(states, C, "predicting"))',
        '        return self.head(align_response_hidden(states, C, "token"))  # PLANT',
        "PPO: the separate critic's value of token t read after token t (a baseline that sees the action)"),
}

# the line each check prints (pytest's progress characters may precede it)
LINE = re.compile(r"([a-z-]+) / ([a-z-]+): P\(rewarded choice\) ([\d.]+) -> ([\d.]+) \(threshold ([\d.]+)\)$")


def planted_copy(name: str, into: Path) -> Path:
    rel, anchor, replacement, _ = PLANTS[name]
    src = into / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
    path = src / rel
    text = path.read_text()
    if text.count(anchor) != 1:
        raise SystemExit(f"plant {name}: anchor found {text.count(anchor)} times in src/{rel} (expected once): "
                         f"{anchor.strip()!r}")
    path.write_text(text.replace(anchor, replacement))
    return src


def run_checks(src: Path, select: str | None = None) -> list[tuple[str, str, float, float, float]]:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           "tests/test_learning.py", *(["-k", select] if select else [])],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    rows = []
    for line in proc.stdout.splitlines():
        m = LINE.search(line.strip())
        if m:
            rows.append((m[1], m[2], float(m[3]), float(m[4]), float(m[5])))
    if not rows:
        raise SystemExit(f"no check ran:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plants", nargs="*", help=f"plants to run (default all): {', '.join(PLANTS)}")
    parser.add_argument("--list", action="store_true", help="list the plants and exit")
    parser.add_argument("-k", dest="select", default=None, help="run only the checks pytest -k selects (e.g. ppo, with_each_loss)")
    args = parser.parse_args(argv)
    if args.list:
        for name, (rel, _, _, what) in PLANTS.items():
            print(f"{name:28s} src/{rel}: {what}")
        return 0
    unknown = [p for p in args.plants if p not in PLANTS]
    if unknown:
        parser.error(f"unknown plant(s) {unknown}; --list shows them")
    undetected = []
    for name in args.plants or list(PLANTS):
        with tempfile.TemporaryDirectory(prefix=f"plant-{name}-") as tmp:
            rows = run_checks(planted_copy(name, Path(tmp)), args.select)
        failed = [f"{layout}/{algo} {end:.3f} < {thr}" for layout, algo, _, end, thr in rows if end < thr]
        passed = [f"{layout}/{algo} {end:.3f}" for layout, algo, _, end, thr in rows if end >= thr]
        print(f"{name}: {len(failed)} of {len(rows)} checks fail — {PLANTS[name][3]}")
        print("    failed: " + ("; ".join(failed) or "none"))
        print("    passed: " + ("; ".join(passed) or "none"), flush=True)
        if not failed:
            undetected.append(name)
    if undetected:
        print(f"not detected by any check: {', '.join(undetected)}")
    return 1 if undetected else 0


if __name__ == "__main__":
    raise SystemExit(main())
