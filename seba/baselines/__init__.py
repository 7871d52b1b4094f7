"""The baselines' registry: one table, ``BASELINES``, from a method's name to its params class
and its row in the paper's tables. Everything else about a method lives in its own module,
``seba/baselines/<name>.py``: its class (a ``seba.baselines.base.Method``, registered with
``@register``), which gets one seed's standardised table at a time: ``fit`` sees the unlabeled
train and validation parts (self- and semi-supervised methods learn from them; supervised ones
ignore them), then ``scores`` gets the test part and a batch of episodes (support positions and
labels, from ``seba.episodes.sample_episodes``, the sampler SeBA's evaluation uses) and returns
class scores for every test row: [episodes, rows, classes]. The stage takes the argmax and scores
the query rows exactly as for SeBA.

This module is light (no torch): every stage validates the whole of params.yaml, the baselines'
sections included, through ``seba.config``, which builds its ``baselines`` section from this
table. A method's module is the only method code its DVC stage depends on (``base.load_method``
imports it alone): editing one method reruns only that method's stages.

Add a method: its module, its params class and one line in ``BASELINES`` here, its section in
params.yaml; see docs/adding-a-method.md.
"""

import dataclasses

from seba.errors import ConfigError
from seba.schema import Bool, Float, Fraction, Int, PositiveFloat, PositiveInt, Str, choice, section

# Each method's settings: the `baselines.<name>` section of params.yaml, its defaults written
# here once (params.yaml repeats them as the values to edit; tests/test_config.py checks they agree).
# A field's type is its check (seba.schema): PositiveInt > 0, Fraction in (0, 1], choice(...).

@section
class KnnConfig:
    k: PositiveInt = 1  # neighbours for 5- and 10-shot (capped at the support size); 1-shot always uses k = 1


@section
class LogregConfig:
    C: PositiveFloat = 1.0  # inverse L2 strength (scikit-learn's default)
    max_iter: PositiveInt = 1000


@section
class ScarfConfig:
    corruption_rate: Fraction = 0.6  # SCARF paper's default
    temperature: PositiveFloat = 1.0  # SCARF paper's default
    encoder_hidden: PositiveInt = 1024  # as SeBA's encoder
    encoder_out: PositiveInt = 256
    lr: PositiveFloat = 1e-3
    batch_size: PositiveInt = 256  # SCARF paper: 128; 256 halves the steps on 2 cores
    max_epochs: PositiveInt = 1000  # cap; early stopping ends earlier
    max_steps: PositiveInt = 3000  # optimiser-step cap (cost budget, as VIME's and SubTab's)
    patience: PositiveInt = 20  # SeBA's early-stopping rule (epochs), short for the cost budget
    min_delta: Float = 0.001
    precision: choice("fp32", "bf16", "auto") = "auto"


@section
class CatboostConfig:
    iterations: PositiveInt = 200  # boosting rounds per episode (CatBoost's default 1000; cost budget, see README)
    learning_rate: PositiveFloat = 0.1  # CatBoost picks ~0.03 for 1000 rounds; 0.1 for 200 rounds
    depth: PositiveInt = 4  # CatBoost's default 6; 4 is 3-9x faster on 10-class supports at equal accuracy
    border_count: PositiveInt = 32  # CatBoost's default 254; a support has at most 100 distinct values
    l2_leaf_reg: PositiveFloat = 3.0  # CatBoost's default


@section
class StuntConfig:
    ways: PositiveInt = 10  # k-means clusters = classes per self-generated task (official code: num_ways 10)
    shots: PositiveInt = 1  # support rows per pseudo-class (official: num_shots 1)
    queries: PositiveInt = 15  # query rows per pseudo-class (official: num_shots_test 15)
    tasks_per_step: PositiveInt = 4  # tasks per Adam step (official: batch_size 4)
    min_column_fraction: Fraction = 0.2  # share of original columns chosen per task, drawn in [0.2, 0.5]
    max_column_fraction: Fraction = 0.5  # (official: int(0.2 D) .. int(0.5 D) columns)
    kmeans_iterations: PositiveInt = 20  # Lloyd iterations (official: faiss niter 20)
    kmeans_points_per_cluster: PositiveInt = 256  # k-means on <= ways * 256 sampled rows (faiss's default cap)
    task_pool: PositiveInt = 500  # pseudo-labelled column subsets computed up front, reused with fresh rows/perturbations
    max_rejections: PositiveInt = 20000  # column subsets whose smallest cluster is too small, before giving up
    val_clusters: PositiveInt = 2  # pseudo-validation k-means clusters (official income script: 2)
    val_restarts: PositiveInt = 10  # k-means restarts for the pseudo-validation labels (scikit-learn's n_init then)
    val_queries: PositiveInt = 30  # query rows per pseudo-class in a validation task (official: 30)
    val_tasks: PositiveInt = 200  # fixed pseudo-validation tasks (official: ~1000 fresh ones per evaluation)
    eval_every: PositiveInt = 50  # steps between pseudo-validations (official: eval_step 50)
    patience: PositiveInt = 1000  # steps without a better pseudo-validation accuracy before stopping
    max_steps: PositiveInt = 2000  # step cap (official: 10000 steps, no early stop); the cost budget
    encoder_hidden: PositiveInt = 1024  # as SeBA's encoder
    encoder_out: PositiveInt = 256
    lr: PositiveFloat = 1e-3  # Adam (official)
    precision: choice("fp32", "bf16", "auto") = "auto"
    head: choice("protonet", "seba") = "protonet"  # protonet: Euclidean prototypes at every shot (STUNT's) | seba: SeBA's heads


@section
class D2r2Config:
    # Sources: the official code (github.com/Anony11131223/D2R2): main.py's flags and
    # diffusion_feature.py's DiffusionFeatureExtractor defaults; D2R2-c is mean_center=True,
    # iteration_steps=0 (docs/baselines.md#d2r2-c).
    T: PositiveInt = 10  # diffusion steps (main.py: T 10)
    embed_dim: PositiveInt = 10  # the representation's width (main.py: embed_dim 10)
    hidden: PositiveInt = 512  # (main.py: hidden_dim 512)
    layers: PositiveInt = 3  # hidden layers of both networks (main.py: num_layers 3)
    time_dim: PositiveInt = 16  # Fourier features of the timestep (diffusion_feature.py: time_dim 16)
    alpha: Float = 1.0  # weight of the random distance matching loss (main.py: alpha 1)
    col_select_ratio: Fraction = 0.1  # p of the random projections (main.py: col_select_ratio 0.1)
    noise_aug_scale: Float = 1.0  # E's input noise, in column stds (main.py: noise_aug_scale 1)
    categorical_noise: Float = 0.1  # E's input noise std on one-hot columns (datasets.py: cate_perturbation_scale)
    lr: PositiveFloat = 3e-4  # Adam with cosine decay to 0 (diffusion_feature.py: lr 3e-4)
    lr_decay_share: Fraction = 0.6667  # decay over this share of max_steps (official: 100,000 of 150,000 steps)
    batch_size: PositiveInt = 256  # rows drawn afresh each step (main.py: batch_size 256)
    max_steps: PositiveInt = 3000  # step cap (cost budget, a deviation; official: 150,000 steps)
    eval_every: PositiveInt = 200  # steps between pseudo-validations (official: 10,000 of 150,000)
    min_accepted_step: Int = 1000  # first selectable checkpoint (official: 50,000 of 150,000)
    val_clusters: PositiveInt = 2  # pseudo-validation classes (official: the true class count, unknown to fit)
    val_episodes: PositiveInt = 100  # pseudo-validation episodes, fixed up front (official: 100 fresh per test)
    val_kmeans_steps: PositiveInt = 5  # soft k-means steps of the pseudo-labels (datasets.py: 5)
    temperature: PositiveFloat = 1.0  # prototype scores' temperature (main.py: 1; argmax unaffected)


@section
class VimeConfig:
    p_m: Fraction = 0.3  # corruption probability (VIME's official code default)
    alpha: PositiveFloat = 2.0  # weight of the reconstruction loss (VIME's official code default)
    encoder_hidden: PositiveInt = 1024  # as SeBA's encoder
    encoder_out: PositiveInt = 256
    lr: PositiveFloat = 1e-3
    batch_size: PositiveInt = 128  # VIME's official code default
    max_epochs: PositiveInt = 1000  # cap; early stopping usually ends earlier
    max_steps: PositiveInt = 3000  # cap on optimiser steps (cost budget; VIME's code: 10 epochs)
    patience: PositiveInt = 20  # SeBA's early-stopping rule, shorter patience for the cost budget
    min_delta: Float = 0.001
    precision: choice("fp32", "bf16", "auto") = "auto"


@section
class SubtabConfig:
    n_subsets: PositiveInt = 4  # SubTab's official config default
    overlap: Fraction = 0.75  # share of a subset's width taken from its neighbour (SubTab default)
    noise: choice("swap", "gaussian", "zero", "none") = "swap"  # noise added to each subset (SubTab default: swap_noise)
    masking_ratio: Fraction = 0.3  # share of a subset's columns that get noise (SubTab default)
    noise_level: Float = 0.1  # std of the Gaussian noise (SubTab default; used only by noise: gaussian)
    temperature: PositiveFloat = 0.1  # NT-Xent temperature tau (SubTab default)
    contrastive_weight: Float = 1.0  # SubTab adds the losses with weight 1; 0 disables
    distance_weight: Float = 1.0
    encoder_hidden: PositiveInt = 1024  # as SeBA's encoder
    encoder_out: PositiveInt = 256
    lr: PositiveFloat = 1e-3  # SubTab default
    batch_size: PositiveInt = 32  # SubTab default
    max_epochs: PositiveInt = 1000  # cap; early stopping usually ends earlier
    max_steps: PositiveInt = 2000  # cap on optimiser steps (cost budget; SubTab's code: 15 epochs)
    patience: PositiveInt = 20  # SeBA's early-stopping rule, shorter patience for the cost budget
    min_delta: Float = 0.001
    precision: choice("fp32", "bf16", "auto") = "auto"


@section
class TjepaConfig:
    # Sources: the official code's scripts/launch_tjepa.sh (the run configuration it publishes) where
    # it sets a value, src/configs.py's defaults where it does not. Cut for the cost budget
    # (docs/baselines.md): layers, pred_layers, batch_size, max_steps and dropout; the launch
    # script's values take 30-45 min per small table on this CPU, a day or more per wide one,
    # and over 19 GB of memory on dna.
    dim: PositiveInt = 64  # token width (launch: model_dim_hidden 64; configs.py: 64)
    layers: PositiveInt = 4  # encoder transformer layers (configs.py: 4; launch: 16; cost budget)
    heads: PositiveInt = 2  # (launch: 2; configs.py: 8)
    dim_feedforward: PositiveInt = 64  # (launch: 64; configs.py: 256)
    dropout: Float = 0.0  # encoder dropout (launch: 0.0019, its sweep's range [0, 0.01]; > 0 is 3x slower here)
    reg_tokens: PositiveInt = 1  # [REG] regularisation tokens (launch: n_cls_tokens 1)
    pred_dim: PositiveInt = 16  # predictor width (launch: pred_embed_dim 16; configs.py: 64)
    pred_layers: PositiveInt = 2  # (configs.py: 2; launch: 16; cost budget)
    pred_heads: PositiveInt = 4  # (launch and configs.py: 4)
    pred_dim_feedforward: PositiveInt = 256  # (configs.py; launch does not set it)
    pred_dropout: Float = 0.0  # (launch: 0.0019, sweep range [0, 0.01]; configs.py: 0.1)
    min_context_share: Fraction = 0.13628349247854785  # context: a share of the features (launch; configs.py: 0.2)
    max_context_share: Fraction = 0.36819012681604135  # (launch; configs.py: 0.4)
    min_target_share: Fraction = 0.1556321308543076  # each target: a share of the features (launch; configs.py: 0.2)
    max_target_share: Fraction = 0.6222278244105446  # (launch; configs.py: 0.4)
    targets: PositiveInt = 4  # target sets per context (launch and configs.py: mask_num_preds 4)
    ema_start: Fraction = 0.996  # target-encoder momentum, linear ramp to ema_end over the planned steps
    ema_end: Fraction = 1.0  # (launch and configs.py)
    grad_clip: Float = 1.0  # element-wise clamp of the context encoder's gradients (configs.py; 0: off)
    lr: PositiveFloat = 0.0003658682841082736  # Adam, constant (launch: the peak of warm-up + cosine, AdamW, decay 0)
    batch_size: PositiveInt = 32  # (launch: 512; configs.py: 64; cost budget)
    max_epochs: PositiveInt = 300  # (launch: 300; configs.py: 100)
    max_steps: PositiveInt = 500  # optimiser-step cap, whole epochs (cost budget; launch's 300 epochs: 600-2700 steps here, income 21600)
    patience: PositiveInt = 20  # SeBA's early-stopping rule on a fixed-mask validation loss (launch: 100, train loss)
    min_delta: Float = 0.001
    precision: choice("fp32", "bf16", "auto") = "auto"

    def __post_init__(self):
        if self.dim % self.heads or self.pred_dim % self.pred_heads or self.dim % 2 or self.pred_dim % 2:
            raise ConfigError("baselines.tjepa: dim and pred_dim must be even and divisible by heads and "
                              f"pred_heads, got {self.dim}/{self.heads} and {self.pred_dim}/{self.pred_heads}")
        if self.min_context_share > self.max_context_share or self.min_target_share > self.max_target_share:
            raise ConfigError("baselines.tjepa: need min_context_share <= max_context_share and "
                              "min_target_share <= max_target_share")
        if self.min_context_share + self.min_target_share >= 1:
            raise ConfigError("baselines.tjepa: min_context_share + min_target_share must be < 1 (the context "
                              "and a target are disjoint)")
        if self.ema_start > self.ema_end:
            raise ConfigError("baselines.tjepa: need ema_start <= ema_end")
        if not 0 <= self.dropout < 1 or not 0 <= self.pred_dropout < 1 or self.grad_clip < 0:
            raise ConfigError("baselines.tjepa: need 0 <= dropout, pred_dropout < 1 and grad_clip >= 0")


@section
class SaintConfig:
    # Defaults: somepago/saint train_robust.py / pretraining.py (docs/baselines.md#saint). With
    # official_rules the architecture below is changed as train_robust.py does before training:
    # attention != col -> depth 1, 4 heads, embedding 16, ff dropout 0.8; > 100 original columns ->
    # batch <= 64 (and embedding <= 4, which the first rule overrides). The log names the rules applied.
    embedding_size: PositiveInt = 32  # --embedding_size
    depth: PositiveInt = 6  # --transformer_depth
    heads: PositiveInt = 8  # --attention_heads
    ff_dropout: Float = 0.1  # --ff_dropout (its --attention_dropout is never applied by its attention layer)
    attention: choice("colrow", "col", "row") = "colrow"  # colrow: SAINT | col: SAINT-s | row: SAINT-i
    official_rules: Bool = True
    wide_embedding: PositiveInt | None = None  # above 100 columns, embedding at most this after the rules
    # (not official; the cost setting, e.g. 4: the first rule's cap that the second overrides)
    batch_size: PositiveInt = 256  # --batchsize
    lr: PositiveFloat = 1e-4  # AdamW, as pretraining.py (hard-coded there)
    weight_decay: Float = 0.01  # torch's AdamW default (pretraining.py sets none)
    epochs: PositiveInt = 50  # --pretrain_epochs; fixed, no early stopping (as the official pretraining)
    max_steps: PositiveInt = 1000  # optimiser-step cap (cost budget, a deviation; docs/baselines.md#saint)
    cutmix: Bool = True  # CutMix in input space (--pt_aug cutmix)
    cutmix_share: Fraction = 0.1  # probability that a feature takes the partner row's value (--pt_aug_lam)
    mixup: Bool = True  # mixup in embedding space (--pt_aug mixup)
    mixup_lambda: Fraction = 0.3  # weight of the row's own embedding (--mixup_lam; the partner gets 0.7)
    nce_temp: PositiveFloat = 0.7  # InfoNCE temperature (--nce_temp)
    contrastive_weight: Float = 0.5  # --lam0; 0 disables the contrastive loss
    categorical_weight: Float = 1.0  # --lam2: denoising cross-entropy, summed over categorical features
    numeric_weight: Float = 10.0  # --lam3: denoising MSE, averaged over numeric features
    projection: choice("diff", "same") = "diff"  # --pt_projhead_style: a projection head per view, or one shared
    representation: choice("cls", "tokens") = "cls"  # cls: the CLS token's output (official) | tokens: all, flattened
    precision: choice("fp32", "bf16", "auto") = "auto"

    def __post_init__(self):
        if not 0 <= self.ff_dropout < 1:
            raise ConfigError(f"params.yaml: 'baselines.saint.ff_dropout' must lie in [0, 1), got {self.ff_dropout}")
        if min(self.weight_decay, self.contrastive_weight, self.categorical_weight, self.numeric_weight) < 0:
            raise ConfigError("baselines.saint: weight_decay and the loss weights must be >= 0")


@section
class PseudolabelConfig:
    hidden: PositiveInt = 128  # one hidden ReLU layer per episode's MLP (our cost/accuracy measurement)
    steps: PositiveInt = 300  # fixed Adam steps per episode; all episodes of a shot are trained at once
    batch_size: PositiveInt = 64  # shared unlabeled rows per step (STUNT: 100); the whole support every step
    lr: PositiveFloat = 1e-3  # STUNT's baselines: Adam, lr 1e-3, weight decay 1e-4
    weight_decay: Float = 1e-4
    alpha_f: Float = 3.0  # Lee (2013): final pseudo-label weight
    t1_fraction: Float = 0.1  # Lee: alpha = 0 before epoch T1 = 100, alpha_f from T2 = 600, here
    t2_fraction: Float = 0.6  # read as shares of the steps (as if a 1000-epoch run)
    threshold: Float = 0.0  # pseudo-label only rows predicted with this confidence (0: Lee, every row)
    episode_chunk: PositiveInt = 100  # episodes trained together (memory bound)
    precision: choice("fp32", "bf16", "auto") = "auto"  # fp32 | bf16 (autocast) | auto (bf16 where native); bf16 measured equal

    def __post_init__(self):
        if not 0 <= self.t1_fraction < self.t2_fraction <= 1:
            raise ConfigError("baselines.pseudolabel: need 0 <= t1_fraction < t2_fraction <= 1, got "
                              f"{self.t1_fraction} and {self.t2_fraction}")
        if not 0 <= self.threshold < 1 or self.alpha_f < 0 or self.weight_decay < 0:
            raise ConfigError("baselines.pseudolabel: need 0 <= threshold < 1, alpha_f >= 0, weight_decay >= 0")


@section
class MeanteacherConfig:
    hidden: PositiveInt = 128  # one hidden ReLU layer per episode's MLP (student and teacher)
    steps: PositiveInt = 300  # fixed Adam steps per episode; all episodes of a shot are trained at once
    batch_size: PositiveInt = 64  # shared unlabeled rows per step (STUNT: 100); the whole support every step
    lr: PositiveFloat = 1e-3  # STUNT's baselines: Adam, lr 1e-3, weight decay 1e-4
    weight_decay: Float = 1e-4
    consistency: Float = 1.0  # max consistency weight; STUNT's grid {0.1, 1, 10, 20, 50, 100}, MT code 100
    rampup_fraction: Fraction = 0.3  # sigmoid ramp-up over this share of the steps (MT code: 40k of 150k)
    ema_decay: Float = 0.99  # teacher EMA decay (MT code: 0.99 during ramp-up, 0.999 after)
    input_noise: Float = 0.15  # std of the Gaussian input noise on the standardised features (MT code)
    episode_chunk: PositiveInt = 100  # episodes trained together (memory bound)
    precision: choice("fp32", "bf16", "auto") = "auto"  # fp32 | bf16 (autocast) | auto (bf16 where native)

    def __post_init__(self):
        if not 0 <= self.ema_decay < 1 or self.consistency < 0 or self.input_noise < 0 or self.weight_decay < 0:
            raise ConfigError("baselines.meanteacher: need 0 <= ema_decay < 1 and consistency, input_noise, "
                              "weight_decay >= 0")


@section
class TabpfnConfig:
    # The pretrained weights are in no wheel and are not downloaded here: a local checkpoint file (or a
    # folder holding one classifier checkpoint), relative to the repository root; None: the folder named
    # by TABPFN_MODEL_CACHE_DIR (the tabpfn package's own variable). See docs/baselines.md#tabpfn.
    model_path: Str | None = None
    n_estimators: PositiveInt = 8  # TabPFN's default ensemble size (tabpfn >= 2.1; 2.0.x: 4)
    softmax_temperature: PositiveFloat = 0.9  # TabPFN v2's default
    average_before_softmax: Bool = False  # TabPFN's default: average the members' probabilities
    balance_probabilities: Bool = False  # TabPFN's default (a support set is balanced anyway)
    inference_precision: choice("auto", "autocast", "fp32", "fp64") = "auto"  # TabPFN's default (autocast where fast)
    max_features: PositiveInt = 500  # TabPFN v2's pretraining limit on feature columns (v2.5 and later: 2000)
    too_many_features: choice("error", "subsample", "ignore_limits") = "error"  # above max_features: refuse
    # (TabPFN's own behaviour) | a random max_features columns per episode | every column, with TabPFN's
    # ignore_pretraining_limits
    device: choice("stage", "cpu", "cuda") = "stage"  # stage: the baseline stage's device (pretrain.device)


@dataclasses.dataclass(frozen=True)
class Baseline:
    params: type  # its params class: the `baselines.<name>` section
    paper_name: str | None  # its row in data/reference/paper_results.csv (None: the paper has none)


# The registry, in the order of the report's tables. A method's name is its params section, its
# module (seba/baselines/<name>.py), its DVC stages (baseline@<name>-<dataset>) and its episode folder.
BASELINES: dict[str, Baseline] = {
    "knn": Baseline(KnnConfig, "kNN"),
    "logreg": Baseline(LogregConfig, None),
    "catboost": Baseline(CatboostConfig, "CatBoost"),
    "stunt": Baseline(StuntConfig, "STUNT"),
    "scarf": Baseline(ScarfConfig, "Scarf"),
    "vime": Baseline(VimeConfig, "VIME"),
    "subtab": Baseline(SubtabConfig, "SubTab"),
    "tjepa": Baseline(TjepaConfig, "T-JEPA"),
    "saint": Baseline(SaintConfig, "SAINT"),
    "d2r2": Baseline(D2r2Config, "D2R2-c"),
    "pseudolabel": Baseline(PseudolabelConfig, "PseudoL"),
    "meanteacher": Baseline(MeanteacherConfig, "MeanT"),
    "tabpfn": Baseline(TabpfnConfig, "TabPFN"),
}

# The method classes of the modules imported so far, by name (``register`` fills it).
METHODS: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator of a method: its ``name`` must be a row of ``BASELINES``."""
    if cls.name not in BASELINES:
        raise ConfigError(f"baseline '{cls.name}' has no row in seba.baselines.BASELINES")
    METHODS[cls.name] = cls
    return cls
