"""Config composition (Hydra structured configs) and fail-fast validation."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments.runtime.config import register_configs, validate
from experiments.runtime.schema import ConfigError

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
register_configs()


def cfg(*overrides):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
@pytest.mark.parametrize("env", ["bugfix", "long_horizon"])
def test_defaults_compose_and_validate(algo, env):
    c = validate(cfg(f"algo={algo}", f"env={env}"))
    assert c.algo.name == algo and c.env.name == env
    assert c.algo.group_size == (8 if algo == "grpo" else 1)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["algo=grpo", "algo.group_size=1"],
         "algo.group_size=1 is invalid for GRPO: group-relative advantages need at least 2 rollouts per task (use algo=ppo for G=1)"),
        (["algo=ppo", "policy.critic=none"], "algo=ppo needs a critic"),
        (["algo.loss_agg=mean"], "algo.loss_agg='mean' is not a valid choice; allowed: token-mean, seq-mean-token-mean"),
        (["algo.std=bessel"], "allowed: population, sample, none"),
        (["budget.kind=episodes"], "budget.kind='episodes' is not a valid choice; allowed: rollouts"),
        (["compression.strategy=zip"], "compression.strategy='zip' is not a valid choice"),
        (["algo.clip_low=1.5"], "algo.clip_low=1.5 must be in [0, 1)"),
        (["algo=ppo", "algo.value_level=step"], "algo.value_level='step' is not a valid choice; allowed: token, turn"),
        (["++env.kwargs.difficulty=insane"], "env.kwargs of env agentrl/BugFix-v"),
        (["compression=recent", "compression.keep_last=-3"], "compression of env agentrl/BugFix-v"),
        (["rollout.max_action_tokens=600"], "rollout.max_action_tokens=600 must be in [1, policy.max_len - 4 = 508]"),
        (["rollout.staleness=-1"], "rollout.staleness=-1 must be >= 0"),
        (["policy.n_heads=3"], "divisible"),
        (["algo.kl_kind=k9"], "allowed: k1, k2, k3"),
        (["algo.lr_schedule=cosine"], "algo.lr_schedule='cosine' is not a valid choice; allowed: constant, linear"),
        (["compression=recent", "compression.budget_tokens=500"], "leaves no room in policy.max_len=512"),
        (["algo=ppo", "policy.critic_d_model=30"],
         "policy.critic_d_model=30 must be >= 1 and divisible by policy.n_heads=4"),
        (["algo=grpo", "policy.critic_n_layers=3"],
         "policy.critic_n_layers=3 sizes a separate critic but policy.critic resolves to 'none'"),
        (["algo=ppo", "policy.critic=head", "policy.critic_d_model=32"], "resolves to 'head'"),
    ],
)
def test_bad_configs_fail_with_one_line(overrides, message):
    with pytest.raises(ConfigError) as err:
        validate(cfg(*overrides))
    text = str(err.value)
    assert message in text and "\n" not in text


def test_unknown_key_and_wrong_type_fail():
    with pytest.raises(Exception):
        cfg("algo.grup_size=8")  # not in the schema
    with pytest.raises(Exception):
        cfg("algo.group_size=eight")


@pytest.mark.parametrize("algo, foreign", [
    ("grpo", ["gamma", "lam", "vf_coef", "value_clip", "value_warmup_updates", "norm_adv", "value_level"]),
    ("ppo", ["std", "adv_eps", "dynamic_sampling"]),
])
def test_each_algorithm_schema_has_only_its_own_knobs(algo, foreign):
    """One home per knob: a GRPO config has no critic fields, a PPO config no group fields; setting
    one is a composition error (and a TypeError in Python)."""
    from experiments.runtime.schema import ALGO_SCHEMAS, AlgoConfig

    c = validate(cfg(f"algo={algo}"))
    assert type(c.algo) is ALGO_SCHEMAS[algo]
    for name in foreign:
        assert not hasattr(c.algo, name), name
        with pytest.raises(Exception, match=f"Could not override 'algo.{name}'"):
            cfg(f"algo={algo}", f"algo.{name}=1")
        with pytest.raises(TypeError, match=name):
            AlgoConfig(name=algo, **{name: 1})
    for removed in ("loss_on_observations", "compression_as_terminal"):
        assert not hasattr(c.algo, removed)
    assert not hasattr(c, "debug_kill_after_update")


def test_option_yaml_states_only_what_differs_from_the_schema():
    """configs/<group>/*.yaml: every value line differs from the schema default (the schema, in
    experiments/runtime/schema.py or for an algo next to its trainer in algos/, is the one home of
    each knob and its default)."""
    import yaml

    from experiments.runtime import schema as C

    schemas = {"compression": C.CompressionConfig, "policy": C.PolicyConfig, "budget": C.BudgetConfig,
               "logger": C.LoggerConfig, "rollout": C.RolloutConfig, "eval": C.EvalConfig,
               "warmstart": C.WarmstartConfig}
    checked = 0
    for group, schema in [*schemas.items(), *(("algo", s) for s in C.ALGO_SCHEMAS.values())]:
        files = [Path(CONFIGS) / "algo" / f"{schema().name}.yaml"] if group == "algo" else \
            sorted((Path(CONFIGS) / group).glob("*.yaml"))
        for path in files:
            data = yaml.safe_load(path.read_text()) or {}
            data.pop("defaults", None)
            default = schema()
            for key, value in data.items():
                assert getattr(default, key) != value, f"{path.relative_to(CONFIGS)} repeats the default {key}={value}"
            checked += 1
    assert checked >= 17


def test_the_compression_group_is_the_wrappers_settings():
    """One declaration of the compression knobs: the ``compression`` group's schema adds no field to
    ``envs.compression.CompressionSettings`` (the wrapper's), and a composed config's group is one."""
    from dataclasses import fields

    from envs.compression import CompressionSettings
    from experiments.runtime.schema import CompressionConfig

    assert issubclass(CompressionConfig, CompressionSettings) and "__annotations__" not in vars(CompressionConfig)
    assert [(f.name, f.default) for f in fields(CompressionConfig)] == [(f.name, f.default) for f in fields(CompressionSettings)]
    register_configs()
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        c = validate(compose(config_name="config", overrides=["compression=recent", "compression.keep_last=3"]))
    assert isinstance(c.compression, CompressionSettings) and (c.compression.strategy, c.compression.keep_last) == ("recent", 3)


# the presets select the project's joblib launcher file, which shadows the plugin's schema on purpose
@pytest.mark.filterwarnings("ignore:\\s*'hydra/launcher/\\w+' is validated against ConfigStore:UserWarning")
@pytest.mark.parametrize("preset", ["compare_small", "compare_bugfix", "compare_horizon", "compare_smollm2"])
def test_compare_presets_inherit_the_base(preset, request):
    """compare_*.yaml inherit compare_base.yaml (one home for the shared fairness setup) and state
    only what differs; the W&B group is the preset's name (``${hydra:runtime.choices.experiment}``)."""
    import yaml
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    if preset == "compare_smollm2":
        request.getfixturevalue("smollm2_dir")  # policy.path resolves to the fetched model
    data = yaml.safe_load((Path(CONFIGS) / "experiment" / f"{preset}.yaml").read_text())
    assert data["defaults"][0] == "compare_base"
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        full = compose(config_name="config", overrides=[f"experiment={preset}", "algo=ppo", "run_dir=unused"],
                       return_hydra_config=True)
    HydraConfig.instance().set_config(full)  # what @hydra.main does, so ${hydra:...} resolves
    with open_dict(full):
        del full["hydra"]
    c = validate(full)
    assert c.logger.group == preset and c.logger.kind == "wandb" and not c.progress
    assert c.warmstart.eval_tasks == c.eval.tasks and c.budget.kind == "rollouts"
    expected = {"compare_small": (1280, "bugfix", "none"), "compare_bugfix": (4096, "bugfix", "none"),
                "compare_horizon": (2048, "long_horizon_v3", "structured_summary"),
                "compare_smollm2": (256, "bugfix", "none")}[preset]
    assert (c.budget.amount, c.env.name, c.compression.strategy) == expected
    if preset == "compare_small":  # the demo: >= 5 seeds, >= 400 final-eval attempts per run
        assert c.eval.tasks * c.eval.samples_per_task >= 400
        seeds = yaml.safe_load((Path(CONFIGS) / "experiment" / "compare_small.yaml").read_text())["hydra"]["sweeper"]["params"]["seed"]
        assert len(str(seeds).split(",")) >= 5
        # its task set (bugfix_graded_tasks.yaml): the graded mixture with each family's own program
        # lengths (no program_lines override), the 6000-demo noisy start model, BC on two processes
        # (the other job waits on it)
        assert c.env.kwargs["difficulty"] == "graded" and "program_lines" not in c.env.kwargs
        # held-out points along every curve: 2 evaluations of 20 updates (1280 rollouts / 64 per update)
        assert "program_lines" not in c.eval.env_kwargs and c.eval.every == 10
        assert (c.warmstart.noise, c.warmstart.demos, c.warmstart.processes) == (0.2, 6000, 2)
        # every trajectory weighs the same in every method's loss (README "The main job": token-mean
        # over-weights long failing episodes under GRPO's broadcast advantage; GRPO 0.55 -> 0.66)
        for algo in ("grpo", "ppo", "rloo", "gigpo", "grpo_process"):
            with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
                other = compose(config_name="config", overrides=[f"experiment={preset}", f"algo={algo}",
                                                                 "run_dir=unused"])
            assert other.algo.loss_agg == "task-mean", algo
    elif preset == "compare_horizon":  # task-mean for every method, as in compare_small
        assert c.algo.loss_agg == "task-mean"
    elif preset == "compare_smollm2":  # task-mean as in compare_small; tutorial tasks, one seed, 16 updates of 16
        assert c.algo.loss_agg == "task-mean" and c.env.kwargs["difficulty"] == "tutorial"
        assert c.policy.kind == "hf" and c.policy.lora_r == 8
        assert c.budget.amount / (c.algo.group_size * c.algo.tasks_per_update) == 16  # 256 / (4 x 4)
    else:  # compare_bugfix keeps the schema's token-mean (not re-measured under task-mean)
        assert c.algo.loss_agg == "token-mean"


def test_algo_name_must_match_its_schema():
    from experiments.runtime.schema import GrpoConfig, PpoConfig

    with pytest.raises(ConfigError, match="algo.name='ppo' does not match its schema GrpoConfig"):
        GrpoConfig(name="ppo")
    with pytest.raises(ConfigError, match="algo.name='sac' is not a valid choice; allowed: grpo, ppo"):
        PpoConfig(name="sac")


def test_warmstart_processes_and_bucketing_are_checked_before_any_compute():
    """One-line errors naming the bad value and what is allowed: processes >= 1, and data-parallel
    cloning only with the bucketed micro-batches (experiments/runtime/bc.py)."""
    from experiments.runtime.schema import WarmstartConfig

    with pytest.raises(ConfigError, match="warmstart.processes=0 must be >= 1"):
        WarmstartConfig(processes=0)
    with pytest.raises(ConfigError, match="warmstart.processes=2 needs warmstart.bucketed=true; allowed with bucketed=false: processes=1"):
        WarmstartConfig(processes=2, bucketed=False)
    assert WarmstartConfig(processes=2).processes == 2 and not WarmstartConfig(bucketed=False).bucketed
