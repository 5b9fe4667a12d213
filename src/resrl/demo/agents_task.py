"""`resrl demo --task agents`: the step-level agents demo on the corridor game (resrl.envs.toy).

    resrl demo --task agents [--quick] [--seed S] [--algorithms grpo,gigpo,empg,resrl] [--seeds 0,1,2]

1. games: corridors of 2..`max_length` rooms; the task "open the red door": the goal's door has one colour and
   a decoy door in another room another (drawn per game from `colours`), and every observation says where each
   coloured door is from here, so the agent has to match the task's colour against the observation's
   (opening the decoy loses). Every (length, goal) pair is one task; the pairs are shuffled with the seed and split
   in two, so the **held-out games are tasks no training game has** (not just other ids of the same tasks).
   Several steps matter (walk to the door, open it) and a wrong move is recoverable (walk on or back);
2. a tiny character-level model (`resrl make-tiny-model`'s architecture) is warm-started by behaviour
   cloning on the scripted expert's walkthroughs of training games, stopped once its sampled success on other
   training games reaches `bc_target` (so it leaves room, and every seed starts from about the same skill);
3. every algorithm trains from that same warm start with step-level rollouts: `resrl train`'s
   `run_training` with `env.layout: step`, environments in the real `EnvPool` workers;
4. success on the held-out games, greedy (one episode per game) and sampled at the training temperature
   (`eval_samples` episodes per game), for the warm start and each policy.

Writes OUT/summary.json (per policy: `greedy`, `avg` = sampled success, `pass_at` {1, n}, the standard
error over games; the same keys as the math demo, so `--seeds` aggregates it with resrl.demo.seeds),
OUT/report.md and OUT/training_success.png (training success per round per algorithm).
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from resrl.demo.seeds import WARM_START

DEFAULT_ALGORITHMS = ("grpo", "gigpo", "empg", "resrl")
SHARED_DEFAULT_ALGORITHMS = "grpo,w-reinforce,resrl"  # `resrl demo`'s --algorithms default (the math demo's)
WARM = WARM_START  # the warm start's policy name in summary.json, as resrl demo --seeds reads it


@dataclass
class AgentsDemoConfig:
    out: str = "runs/demo-agents"
    seed: int = 0
    algorithms: tuple = DEFAULT_ALGORITHMS
    max_length: int = 7  # corridors of 2..max_length rooms: 21 (length, goal) tasks
    test_fraction: float = 0.4  # of the (length, goal) tasks, held out
    train_games: int = 64  # training games (ids) drawn from the training tasks
    # coloured doors (resrl.envs.toy): the goal's and a decoy's colour drawn per game. Without them the task is
    # "open the door of room g", which the tiny model does not learn to read on unseen (length, goal) tasks:
    # behaviour cloning to a loss of 0.000 on 64 games still walked a fixed number of rooms on them
    colours: tuple = ("red", "blue", "green")
    # warm start: behaviour cloning on the expert's walkthroughs of the first `bc_games` training games
    bc_games: int = 32
    bc_steps: int = 400  # at most; it stops earlier at `bc_target`
    # stop behaviour cloning once sampled success (4 episodes per game at the RL temperature) on `bc_dev_games`
    # other training games reaches this (checked every 10 steps from step 50), as the math demo's warm start
    # stops at a target accuracy: every seed starts RL from a policy of about the same skill, with room
    # 0.7: with the compass the only clue, a warm start stopped at 0.5 is mostly colour-blind (it opens the
    # first coloured door it meets), and RL sharpened that shortcut instead of the colour
    bc_target: float | None = 0.7
    bc_dev_games: int = 16
    bc_lr: float = 3e-3
    bc_batch: int = 16
    # RL (resrl train, env.layout: step)
    rounds: int = 20  # generation rounds
    updates_per_round: int = 2  # optimiser updates per round (train.update_prompts = rollout_prompts / this)
    warmup_rounds: int = 5  # linear learning-rate warm-up over these rounds (Adam's first steps are lr-sized)
    learning_rate: float = 5e-4
    # 16 games x 8 trajectories per round, 64 per update: with 8 x 4 and 8 per update (the earlier demo) the
    # updates were mostly noise: training success did not rise in 20 rounds and GRPO at 40 rounds collapsed
    # to garbled actions, while from the same warm starts 16 x 8 lifted GRPO and GiGPO on every seed tried
    rollout_prompts: int = 16  # games per round
    group_size: int = 8  # trajectories per game
    history_window: int = 0  # the observation holds the whole state; a history only invites copying
    max_steps: int = 10  # steps per episode
    max_step_tokens: int = 32
    temperature: float = 1.0
    loss_agg: str = "token-mean"
    overrides: tuple = ()  # further `resrl train` overrides (key=value), e.g. env.invalid_format_penalty=0
    # evaluation on the held-out tasks
    eval_samples: int = 8  # sampled episodes per held-out game
    test_games_per_task: int = 4  # held-out games (ids) per held-out task: 32 games, 256 sampled episodes
    threads: int = 1
    model: dict = field(default_factory=lambda: dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                     num_key_value_heads=2, head_dim=16, intermediate_size=128,
                                                     max_position_embeddings=768))

    def __post_init__(self) -> None:
        if self.updates_per_round < 1 or self.rollout_prompts % self.updates_per_round:
            raise ValueError(f"AgentsDemoConfig.updates_per_round must divide rollout_prompts ({self.rollout_prompts}), "
                             f"got {self.updates_per_round!r}")
        if self.colours and (len(set(self.colours)) < 2 or not all(str(c).isalpha() for c in self.colours)):
            raise ValueError(f"AgentsDemoConfig.colours must be empty or two or more distinct words, got {self.colours!r}")

    @classmethod
    def quick(cls, **kw) -> "AgentsDemoConfig":
        """A smoke run of about a minute: few games, few steps, two algorithms' worth of rounds."""
        base = dict(train_games=16, bc_games=16, bc_steps=40, bc_target=None, rounds=2, warmup_rounds=1, eval_samples=2,
                    test_games_per_task=1, max_steps=8, rollout_prompts=8, group_size=4, updates_per_round=2)
        base.update(kw)
        return cls(**base)


# -- games ------------------------------------------------------------------------------------------

def split_tasks(max_length: int, test_fraction: float, seed: int) -> tuple[list, list]:
    """(train, test) lists of (length, goal) tasks: disjoint, a pure function of the arguments."""
    tasks = [(length, goal) for length in range(2, max_length + 1) for goal in range(1, length)]
    random.Random(seed).shuffle(tasks)
    n_test = max(1, round(len(tasks) * test_fraction))
    return sorted(tasks[n_test:]), sorted(tasks[:n_test])


def make_games(tasks, n: int, prefix: str, seed: int, colours: tuple = ()) -> list[str]:
    """`n` game specs (JSON strings, resrl.envs.toy's format) cycling through `tasks` in a seeded order.
    With `colours` (two or more), the goal's door gets one of them and a decoy door another, in another room
    (all drawn per game)."""
    rng = random.Random(seed)
    order = list(tasks)
    rng.shuffle(order)
    games = []
    for i in range(n):
        length, goal = order[i % len(order)]
        spec = {"game": f"{prefix}-{i}", "length": length, "goal": goal}
        if colours:
            colour, decoy = rng.sample(list(colours), 2)
            # not in room 0 where there is another room for it: a policy that never opens the first door would
            # get that decoy for free (in 2-room corridors room 0 is the only other room)
            rooms = [r for r in range(1, length) if r != goal] or [0]
            spec.update(colour=colour, decoys={decoy: rng.choice(rooms)})
        games.append(json.dumps(spec, sort_keys=True))
    return games


def task_of(game: str) -> tuple[int, int]:
    spec = json.loads(game)
    return int(spec["length"]), int(spec["goal"])


def games_for(cfg: AgentsDemoConfig) -> tuple[list[str], list[str]]:
    train_tasks, test_tasks = split_tasks(cfg.max_length, cfg.test_fraction, cfg.seed)
    train = make_games(train_tasks, cfg.train_games, f"train{cfg.seed}", cfg.seed + 1, cfg.colours)
    test = make_games(test_tasks, len(test_tasks) * cfg.test_games_per_task, f"test{cfg.seed}", cfg.seed + 2,
                      cfg.colours)
    return train, test


# -- warm start -------------------------------------------------------------------------------------

def expert_samples(games, history_window):
    """(step prompt messages, expert reply) for every step of the expert's walkthrough of each game."""
    from resrl.envs.toy import expert_action, make_toy_env

    out = []
    for g in games:
        env = make_toy_env(g, history_window=history_window)
        env.reset()
        for _ in range(20):
            act = expert_action(env)
            out.append((env.step_prompt(), f"<action>{act}</action>"))
            if env.step(f"<action>{act}</action>").done:
                break
    return out


def behaviour_cloning(model_dir, out_dir, games, history_window, steps, seed, lr=3e-3, batch=16, log=print,
                      stop=None, check_every: int = 10, min_steps: int = 0) -> dict:
    """Supervised fine-tuning on the expert's replies (loss on the reply tokens only), at most `steps` steps.
    `stop(model, tokenizer) -> (bool, float)`, asked every `check_every` steps from `min_steps` on, ends it
    early (the math demo's warm start stops at a target accuracy the same way, so RL has room). When no check
    says stop, the weights of the check with the highest value are saved, not the last step's: at a constant
    lr 3e-3 the last step can be a spike (seed 3: loss 0.003 -> 0.079 at step 400, after which the model
    walked right in every game, held-out success 0.000).
    Returns {"samples", "steps", "checks": [(step, value), ...], "kept": the step whose weights were saved}."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    data = []
    for messages, reply in expert_samples(games, history_window):
        prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
        prompt = list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
        answer = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        data.append((prompt, answer))
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = random.Random(seed)
    model.train()
    checks, step, stopped = [], -1, False
    best = None  # (value, step, weights) of the best check so far
    for step in range(steps):
        items = rng.sample(data, min(batch, len(data)))
        L = max(len(p) + len(a) for p, a in items)
        ids = torch.full((len(items), L), tok.pad_token_id, dtype=torch.long)
        labels = torch.full((len(items), L), -100, dtype=torch.long)
        attn = torch.zeros((len(items), L), dtype=torch.long)
        for b, (p, a) in enumerate(items):
            seq = p + a
            ids[b, :len(seq)] = torch.tensor(seq)
            attn[b, :len(seq)] = 1
            labels[b, len(p):len(seq)] = torch.tensor(a)
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            log(f"  BC step {step}: loss {loss.item():.3f}")
        if stop is not None and step + 1 >= min_steps and (step + 1) % check_every == 0:
            model.eval()
            done, value = stop(model, tok)
            model.train()
            checks.append((step + 1, value))
            if done:
                log(f"  BC stopped after {step + 1} steps: check {value:.3f}")
                stopped = True
                break
            if best is None or value > best[0]:
                best = (value, step + 1, {k: v.detach().clone() for k, v in model.state_dict().items()})
    kept = step + 1
    if not stopped and best is not None and best[1] != kept:
        model.load_state_dict(best[2])
        kept = best[1]
        log(f"  BC did not reach its target in {step + 1} steps: keeping the weights of step {kept} "
            f"(check {best[0]:.3f}, the best)")
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return {"samples": len(data), "steps": step + 1, "checks": checks, "kept": kept}


# -- evaluation -------------------------------------------------------------------------------------

def evaluate(model_dir, games, history_window, max_steps, seed=0, temperature=0.0, samples=1, max_step_tokens=32):
    """Success on `games` through the EnvPool: greedy (temperature 0, one episode each) or sampled
    (`samples` episodes per game, seeded). Returns success (mean over episodes), its standard error over
    games, pass@samples (a game counts when any of its episodes won), mean steps, invalid-format rate."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    return play(model, tok, games, history_window, max_steps, seed, temperature, samples, max_step_tokens)


def play(model, tok, games, history_window, max_steps, seed=0, temperature=0.0, samples=1, max_step_tokens=32):
    """`evaluate` on a loaded model: resrl.eval.steps.evaluate_steps on the corridor (resrl.envs.toy), the
    evaluator `resrl eval --env` uses (its extra keys, e.g. pass_at, come along)."""
    from resrl.envs.toy import make_toy_env
    from resrl.eval.steps import evaluate_steps

    return evaluate_steps(model, tok, games, make_toy_env, {"history_window": history_window}, max_steps=max_steps,
                          max_step_tokens=max_step_tokens, seed=seed, temperature=temperature, samples=samples)


def evaluate_policy(model_dir, test_games, cfg: AgentsDemoConfig) -> dict:
    """A policy's summary entry: greedy success, sampled success (`avg`), pass@1 / pass@n, and details."""
    greedy = evaluate(model_dir, test_games, cfg.history_window, cfg.max_steps, max_step_tokens=cfg.max_step_tokens)
    sampled = evaluate(model_dir, test_games, cfg.history_window, cfg.max_steps, seed=cfg.seed + 7,
                       temperature=cfg.temperature, samples=cfg.eval_samples, max_step_tokens=cfg.max_step_tokens)
    return {"greedy": greedy["success"], "avg": sampled["success"], "avg_se": sampled["se"],
            "pass_at": {"1": sampled["success"], str(cfg.eval_samples): sampled["pass"]},
            "episodes": sampled["episodes"], "steps": sampled["steps"],
            "invalid_format_rate": sampled["invalid_format_rate"],
            "greedy_invalid_format_rate": greedy["invalid_format_rate"], "per_game": sampled["per_game"]}


# -- RL ---------------------------------------------------------------------------------------------

def train_config(cfg: AgentsDemoConfig, algo: str, warm_dir, data_path, out_dir):
    from resrl.train import load_config

    return load_config(None, [
        f"model.path={warm_dir}", f"data.train={data_path}", "reward.function=env",
        "env.name=resrl.envs.toy:make_toy_env", "env.layout=step", f"env.history_window={cfg.history_window}",
        f"env.max_steps={cfg.max_steps}", f"env.max_step_tokens={cfg.max_step_tokens}", "env.num_workers=1",
        f"train.output_dir={out_dir}", f"train.max_steps={cfg.rounds * cfg.updates_per_round}",
        f"train.rollout_prompts={cfg.rollout_prompts}", f"train.update_prompts={cfg.rollout_prompts // cfg.updates_per_round}",
        f"train.warmup_steps={cfg.warmup_rounds * cfg.updates_per_round}",
        f"train.group_size={cfg.group_size}", f"train.learning_rate={cfg.learning_rate}",
        f"train.temperature={cfg.temperature}", "train.max_prompt_length=700", f"train.seed={cfg.seed}",
        f"loss.agg={cfg.loss_agg}", f"algorithm.name={algo}", "log.progress=false", "log.report_to=[none]",
        *cfg.overrides])


def rl_run(cfg: AgentsDemoConfig, algo: str, warm_dir, data_path, out_dir) -> dict:
    """One algorithm's RL run from the warm start; returns its per-round training metrics."""
    from resrl.train import run_training

    t = time.perf_counter()
    res = run_training(train_config(cfg, algo, warm_dir, data_path, out_dir))
    keys = ("episode/success", "episode/invalid_format_rate", "episode/invalid_action_rate", "episode/steps")
    rounds = [{k.split("/")[1]: m.get(k) for k in keys} for m in res.metrics if "episode/success" in m]
    return {"rounds": rounds, "train_success": [r["success"] for r in rounds],
            "rl_seconds": round(time.perf_counter() - t, 1)}


# -- outputs ----------------------------------------------------------------------------------------

def plot_training_success(runs: dict, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for algo, r in runs.items():
        x = list(range(1, len(r["rounds"]) + 1))
        axes[0].plot(x, [v["success"] for v in r["rounds"]], marker="o", ms=3, label=algo)
        axes[1].plot(x, [v["invalid_format_rate"] for v in r["rounds"]], marker="o", ms=3, label=algo)
    axes[0].set(title="training success per round", xlabel="generation round", ylabel="success", ylim=(0, 1))
    axes[1].set(title="invalid-format rate per round", xlabel="round", ylabel="rate", ylim=(0, 1))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def paired(results: dict, policy: str) -> dict:
    """Per-game paired difference of sampled success against the warm start: mean and its standard error."""
    a, b = results[policy]["per_game"], results[WARM]["per_game"]
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n) if n > 1 else 0.0
    return {"mean": mean, "se": se, "low": mean - 1.96 * se, "high": mean + 1.96 * se}


def write_report(out: Path, cfg: AgentsDemoConfig, summary: dict) -> None:
    res = summary["results"]
    n = cfg.eval_samples
    lines = [f"# Agents demo (corridor, step layout), seed {cfg.seed}", "",
             f"Held-out: {summary['test_games']} games of {len(summary['test_tasks'])} (length, goal) tasks that no "
             f"training game has; {summary['train_games']} training games of {len(summary['train_tasks'])} tasks. "
             f"Warm start: {summary.get('bc_steps', cfg.bc_steps)} behaviour-cloning steps on {cfg.bc_games} games"
             + (f" (weights kept from step {summary['bc_kept']}, its best check)"
                if summary.get("bc_kept") not in (None, summary.get("bc_steps")) else "") + f". RL: {cfg.rounds} rounds of "
             f"{cfg.rollout_prompts} games x {cfg.group_size} trajectories, {cfg.updates_per_round} updates per round, "
             f"lr {cfg.learning_rate} (linear warm-up over {cfg.warmup_rounds} rounds), loss.agg {cfg.loss_agg}.", "",
             f"| policy | greedy | sampled success ± s.e. ({n}/game) | Pass@{n} | sampled − warm start [95 %] | "
             "invalid format | training success, first → last 3 rounds | RL s |",
             "|---|---|---|---|---|---|---|---|"]
    for p, r in res.items():
        diff = "—" if p == WARM else "{mean:+.3f} [{low:+.3f}, {high:+.3f}]".format(**r["paired_vs_warm_start"])
        tr = "—"
        if p in summary["training"]:
            s = summary["training"][p]["train_success"]
            k = max(1, min(3, len(s) // 2))
            tr = f"{sum(s[:k]) / k:.2f} → {sum(s[-k:]) / k:.2f}"
        secs = summary["training"].get(p, {}).get("rl_seconds", "—")
        lines.append(f"| {p} | {r['greedy']:.3f} | {r['avg']:.3f} ± {r['avg_se']:.3f} | {r['pass_at'][str(n)]:.3f} | "
                     f"{diff} | {r['invalid_format_rate']:.3f} | {tr} | {secs} |")
    lines += ["", "Standard errors and intervals are over held-out games (each game's sampled success is one value; "
              "the difference is paired per game with the warm start).", "",
              "![training success](training_success.png)", ""]
    (out / "report.md").write_text("\n".join(lines))


# -- the demo ---------------------------------------------------------------------------------------

def algo_dir(out: Path, algo: str) -> Path:
    """OUT/<run>: an algorithm's RL run directory. (Not resrl.demo.pipeline's run_dir_name: importing the
    math demo's pipeline from here closes an import cycle through resrl.demo.tasks.)"""
    return out / algo.replace("/", "_")


def train_and_evaluate(cfg: AgentsDemoConfig, algo: str, warm_dir: str, data_path: str, out: Path,
                       test_games: list) -> tuple[dict, dict, float]:
    """One algorithm: its RL run from the warm start, then its held-out evaluation -> (run, result, eval s)."""
    run_dir = algo_dir(out, algo)
    run = rl_run(cfg, algo, warm_dir, data_path, run_dir)
    t = time.perf_counter()
    r = evaluate_policy(str(run_dir / "model"), test_games, cfg)
    return run, r, round(time.perf_counter() - t, 1)


WORKER_CONFIG = "agents_workers.json"  # OUT/agents_workers.json: the settings and inputs every worker reads
WORKER_LOG = "worker.log"               # OUT/<run>/worker.log: a worker's stdout and stderr


def result_path(out: Path, algo: str) -> Path:
    """OUT/<run>.result.json: a worker's run, result and evaluation time (its done-marker)."""
    run_dir = algo_dir(out, algo)
    return run_dir.with_name(run_dir.name + ".result.json")


def worker_main(out, algo: str) -> int:
    """`resrl demo --task agents --out OUT --worker-run ALGO`: one algorithm's `train_and_evaluate` with the
    settings in OUT/agents_workers.json, its result written whole to `result_path` (then renamed: its
    existence means done). Each run seeds itself (train.seed, the evaluation's seeds) and reads the warm
    start from disk, with the one-process demo's torch threads, so the numbers do not depend on the number
    of workers."""
    import torch

    out = Path(out)
    d = json.loads((out / WORKER_CONFIG).read_text())
    cfg = AgentsDemoConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in d["config"].items()})
    if algo not in cfg.algorithms:
        raise ValueError(f"--worker-run {algo!r}: not one of {list(cfg.algorithms)} in {out / WORKER_CONFIG}")
    torch.set_num_threads(cfg.threads)
    run, r, secs = train_and_evaluate(cfg, algo, d["warm_dir"], d["data_path"], out, d["test_games"])
    path = result_path(out, algo)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_jsonable({"run": run, "result": r, "eval_seconds": secs})))
    tmp.replace(path)
    return 0


def run_algorithms(cfg: AgentsDemoConfig, warm_dir: str, data_path: str, out: Path, test_games: list,
                   workers: int = 1, log=print) -> dict:
    """{algo: (run, result, eval seconds)} for every algorithm: in this process one after the other
    (workers = 1), or as jobs of the project's job runner (`resrl.eval.jobs.run_jobs`, at most `workers`
    processes `resrl demo --task agents --out OUT --worker-run ALGO` at once; see `worker_main`). A failed
    worker raises one error naming its job and log once the others have finished."""
    if workers <= 1:
        return {a: train_and_evaluate(cfg, a, warm_dir, data_path, out, test_games) for a in cfg.algorithms}
    from resrl.eval.jobs import Job, Step, run_jobs

    out.mkdir(parents=True, exist_ok=True)
    (out / WORKER_CONFIG).write_text(json.dumps(_jsonable(
        {"config": asdict(cfg), "warm_dir": str(warm_dir), "data_path": str(data_path), "test_games": test_games}),
        indent=1))
    jobs = []
    for algo in cfg.algorithms:
        done_marker, run_log = result_path(out, algo), algo_dir(out, algo) / WORKER_LOG
        for stale in (done_marker, run_log):  # a new warm start: nothing to resume
            stale.unlink(missing_ok=True)
        jobs.append(Job(f"RL {algo}", [Step(["demo", "--task", "agents", "--out", str(out), "--worker-run", algo],
                                            done_marker)], run_log))
    run_jobs(jobs, workers, poll_s=0.2, say=log)
    done = {}
    for algo in cfg.algorithms:
        path = result_path(out, algo)
        d = json.loads(path.read_text())
        path.unlink()
        done[algo] = (d["run"], d["result"], d["eval_seconds"])
    return done


def run_agents_demo(cfg: AgentsDemoConfig, warm_dir: str | None = None, log=print, workers: int = 1) -> dict:
    """Everything; returns the summary written to OUT/summary.json. `warm_dir`: reuse a saved warm start;
    `workers`: processes for the RL runs (each with its evaluation) after the warm start."""
    import torch

    from resrl.models.tiny import TinyModelConfig, build_tiny_model

    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    train_games, test_games = games_for(cfg)
    train_tasks, test_tasks = split_tasks(cfg.max_length, cfg.test_fraction, cfg.seed)
    assert not {task_of(g) for g in train_games} & {task_of(g) for g in test_games}
    data_path = out / "train_games.jsonl"
    with open(data_path, "w") as f:
        for g in train_games:
            f.write(json.dumps({"problem": g, "answer": ""}) + "\n")
    # the rows `resrl eval --env resrl.envs.toy:make_toy_env --data OUT/test_games.jsonl` reads (as train_games.jsonl)
    (out / "test_games.jsonl").write_text("".join(json.dumps({"problem": g, "answer": ""}) + "\n" for g in test_games))
    summary = {"task": "agents", "config": _jsonable(asdict(cfg)), "train_games": len(train_games),
               "test_games": len(test_games), "train_tasks": train_tasks, "test_tasks": test_tasks,
               "results": {}, "training": {}, "timings": {}}
    if warm_dir is None:
        base, warm_dir = out / "model-init", out / "model-bc"
        build_tiny_model(base, TinyModelConfig(**cfg.model, seed=cfg.seed))
        dev = train_games[cfg.bc_games:cfg.bc_games + cfg.bc_dev_games]
        stop = None
        if cfg.bc_target is not None and dev:
            def stop(model, tok):  # sampled as RL samples (temperature, full softmax), 4 episodes per game
                s = play(model, tok, dev, cfg.history_window, cfg.max_steps, seed=cfg.seed + 11,
                         temperature=cfg.temperature, samples=4, max_step_tokens=cfg.max_step_tokens)
                return s["success"] >= cfg.bc_target, s["success"]
        log(f"warm start: behaviour cloning (at most {cfg.bc_steps} steps) on the expert's walkthroughs of "
            f"{cfg.bc_games} training games" + (f", until sampled success on {len(dev)} other training games "
                                                 f"reaches {cfg.bc_target}" if stop else ""))
        bc = behaviour_cloning(str(base), str(warm_dir), train_games[:cfg.bc_games], cfg.history_window,
                               cfg.bc_steps, cfg.seed, cfg.bc_lr, cfg.bc_batch, log=log, stop=stop, min_steps=50)
        summary["bc_samples"], summary["bc_steps"], summary["bc_checks"] = bc["samples"], bc["steps"], bc["checks"]
        summary["bc_kept"] = bc["kept"]
    summary["timings"]["warm start"] = round(time.perf_counter() - t0, 1)
    t = time.perf_counter()
    summary["results"][WARM] = evaluate_policy(str(warm_dir), test_games, cfg)
    summary["timings"]["evaluate warm start"] = round(time.perf_counter() - t, 1)
    log(f"{WARM}: held-out greedy {summary['results'][WARM]['greedy']:.3f}, sampled "
        f"{summary['results'][WARM]['avg']:.3f}")
    workers = max(1, min(workers, len(cfg.algorithms)))
    if workers > 1:
        log(f"RL runs: {len(cfg.algorithms)}, {workers} worker processes (one torch thread each)")
    runs = run_algorithms(cfg, str(warm_dir), str(data_path), out, test_games, workers, log)
    for algo in cfg.algorithms:
        run, r, eval_seconds = runs[algo]
        summary["training"][algo] = run
        summary["timings"][f"evaluate {algo}"] = eval_seconds
        summary["results"][algo] = {**r, "rl_seconds": run["rl_seconds"], "paired_vs_warm_start": paired(
            {algo: r, WARM: summary["results"][WARM]}, algo)}
        log(f"{algo}: held-out greedy {r['greedy']:.3f}, sampled {r['avg']:.3f} ± {r['avg_se']:.3f}; training "
            f"success per round {['%.2f' % s for s in run['train_success']]} ({run['rl_seconds']} s)")
    summary["timings"]["total"] = round(time.perf_counter() - t0, 1)
    if summary["training"]:
        plot_training_success(summary["training"], out / "training_success.png")
    write_report(out, cfg, summary)
    (out / "summary.json").write_text(json.dumps(_jsonable(summary), indent=1))
    log((out / "report.md").read_text())
    return summary


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


# -- `resrl demo --task agents` ---------------------------------------------------------------------

def config_from_args(args) -> AgentsDemoConfig:
    from resrl.errors import InputError

    algorithms = args.algorithms
    algorithms = DEFAULT_ALGORITHMS if algorithms in (None, SHARED_DEFAULT_ALGORITHMS) else tuple(
        a.strip() for a in algorithms.split(",") if a.strip())
    cfg = AgentsDemoConfig.quick() if args.quick else AgentsDemoConfig()
    cfg = replace(cfg, out=args.out if args.out != "runs/demo" else "runs/demo-agents", seed=args.seed,
                  algorithms=algorithms, threads=args.threads)
    if args.rl_steps is not None:
        if args.rl_steps < 1:
            raise InputError(f"--rl-steps must be >= 1, got {args.rl_steps}")
        cfg = replace(cfg, rounds=args.rl_steps)
    if args.lr is not None:
        if not args.lr > 0:
            raise InputError(f"--lr must be > 0, got {args.lr}")
        cfg = replace(cfg, learning_rate=args.lr)
    if args.eval_samples is not None:
        if args.eval_samples < 1:
            raise InputError(f"--eval-samples must be >= 1, got {args.eval_samples}")
        cfg = replace(cfg, eval_samples=args.eval_samples)
    return cfg


def default_workers(cfg: AgentsDemoConfig, quick: bool) -> int:
    """RL worker processes when `--workers` is not given: min(CPUs, algorithms); 1 with --quick, whose RL
    runs take less time than a worker process takes to start."""
    from resrl.eval.jobs import available_cpus

    return 1 if quick else max(1, min(available_cpus(), len(cfg.algorithms)))


def run_from_args(args) -> int:
    """The DemoTask runner: one seed, or `--seeds` (one process per seed, then resrl.demo.seeds' tables with
    the differences paired against the warm start)."""
    if args.worker_run is not None:  # one RL run of a demo in OUT (run_algorithms' job)
        return worker_main(args.out, args.worker_run)
    cfg = config_from_args(args)
    if args.seeds is None:
        run_agents_demo(cfg, workers=default_workers(cfg, args.quick) if args.workers is None else args.workers)
        return 0
    from resrl.demo.seeds import parse_seeds, run_multiseed_demo

    return run_multiseed_demo(args, parse_seeds(args.seeds), "agents", ",".join(cfg.algorithms), cfg.out, baseline=WARM)


__all__ = ["AgentsDemoConfig", "run_agents_demo", "run_from_args", "split_tasks", "games_for", "evaluate", "play",
           "behaviour_cloning", "DEFAULT_ALGORITHMS"]
