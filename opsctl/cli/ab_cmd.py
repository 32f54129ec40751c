"""`opsctl ab equivalence`: TOST on a business metric's per-arm figures."""

from __future__ import annotations

import click

from opsctl.cli.output import emit, output_option


@click.group()
def ab():
    """A/B checks for a migration: show a business metric did not change.

    \b
    Examples:
      # share of sessions with a suggestion accepted, arm A (current) vs B (new backend)
      opsctl ab equivalence --successes-a 4000 --trials-a 10000 --successes-b 4050 --trials-b 10000 --margin 0.02
      # suggestions per request: means, sample variances and counts, within 2% of arm A
      opsctl ab equivalence --mean-a 3.20 --var-a 1.44 --n-a 5000 --mean-b 3.17 --var-b 1.50 --n-b 5000 \\
          --relative-margin 0.02 -o json
    """


@ab.command()
@click.option("--successes-a", type=int, help="Arm A (control): units with the outcome.")
@click.option("--trials-a", type=int, help="Arm A: units.")
@click.option("--successes-b", type=int, help="Arm B (treatment): units with the outcome.")
@click.option("--trials-b", type=int, help="Arm B: units.")
@click.option("--mean-a", type=float, help="Arm A: mean of the metric.")
@click.option("--var-a", type=float, help="Arm A: sample variance of the metric (per unit).")
@click.option("--n-a", type=int, help="Arm A: units.")
@click.option("--mean-b", type=float, help="Arm B: mean of the metric.")
@click.option("--var-b", type=float, help="Arm B: sample variance of the metric (per unit).")
@click.option("--n-b", type=int, help="Arm B: units.")
@click.option("--margin", type=float, help="Equivalence margin, absolute, in the metric's units (B - A within ±margin).")
@click.option("--relative-margin", type=float, help="Equivalence margin as a fraction of arm A's estimate.")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="Level of each one-sided test; the interval shown is the (1 - 2 alpha) one.")
@output_option
def equivalence(output, alpha, margin, relative_margin, **arms):
    """Two one-sided tests (TOST): is B - A inside (-margin, +margin)?

    Give successes/trials for a proportion, or mean/variance/n for a mean, for both arms.
    Equivalent when the (1 - 2 alpha) confidence interval of B - A lies inside the margin.
    Exit 0 when equivalent, 1 when equivalence is not shown, 2 on bad input.

    \b
    Example:
      opsctl ab equivalence --successes-a 4000 --trials-a 10000 \\
          --successes-b 4050 --trials-b 10000 --margin 0.02
    """
    from opsctl.errors import OpsctlError, UsageError
    from opsctl.quality import equivalence as eq

    props = ("successes_a", "trials_a", "successes_b", "trials_b")
    mean_keys = ("mean_a", "var_a", "n_a", "mean_b", "var_b", "n_b")
    given_p = [k for k in props if arms[k] is not None]
    given_m = [k for k in mean_keys if arms[k] is not None]
    flag = lambda k: "--" + k.replace("_", "-")  # noqa: E731
    if given_p and given_m:
        raise UsageError("give either successes/trials or mean/variance/n, not both")
    if given_p:
        missing = [flag(k) for k in props if arms[k] is None]
        if missing:
            raise UsageError(f"missing {', '.join(missing)}")
        result = eq.proportions(*(arms[k] for k in props), margin=margin, relative_margin=relative_margin, alpha=alpha)
    elif given_m:
        missing = [flag(k) for k in mean_keys if arms[k] is None]
        if missing:
            raise UsageError(f"missing {', '.join(missing)}")
        result = eq.means(*(arms[k] for k in mean_keys), margin=margin, relative_margin=relative_margin, alpha=alpha)
    else:
        raise UsageError("give --successes-a/--trials-a/--successes-b/--trials-b, "
                         "or --mean-a/--var-a/--n-a/--mean-b/--var-b/--n-b")
    emit(result.to_dict(), output, table=_table)
    if not result.equivalent:
        raise OpsctlError(f"equivalence not shown: the {result.confidence:.0%} interval of B - A "
                          f"[{result.interval_low:.6g}, {result.interval_high:.6g}] is not inside "
                          f"±{result.margin_high:.6g}")


def _table(d):
    what = "proportion" if d["kind"] == "proportions" else "mean"
    conf = f"{d['confidence']:.0%}"
    lines = [
        f"arm A: {what} {d['a']['estimate']:.6g}  (n = {d['a']['n']})",
        f"arm B: {what} {d['b']['estimate']:.6g}  (n = {d['b']['n']})",
        f"difference B - A: {d['difference']:+.6g}  (standard error {d['standard_error']:.6g})",
        f"{conf} interval: [{d['interval_low']:+.6g}, {d['interval_high']:+.6g}]  (z = {d['z_quantile']:.4f})",
        f"margin: ±{d['margin_high']:.6g}",
        f"TOST p-values: lower {d['p_lower']:.4g}, upper {d['p_upper']:.4g}  (alpha {d['alpha']:g})",
        "verdict: " + ("EQUIVALENT: the interval lies inside the margin" if d["equivalent"]
                       else "NOT SHOWN EQUIVALENT: the interval reaches past the margin"),
    ]
    lines += [f"warning: {w}" for w in d["warnings"]]
    return "\n".join(lines)
