from django import forms

REDUCER_NAMES = ("mean", "median", "sum", "min", "max", "rms")


class ProjectMetricForm(forms.Form):
    name = forms.SlugField(max_length=40, help_text="As run's metrics.json names it, e.g. rel_error")
    direction = forms.ChoiceField(choices=[("↑", "↑ higher is better"), ("↓", "↓ lower is better")])
    expression = forms.CharField(
        max_length=300,
        help_text="Over results.parquet's columns: numbers, + - * / ** %, comparisons, "
        "abs sqrt log log10 exp square minimum maximum; e.g. abs(prediction - target) / abs(target)",
    )
    # expressions.REDUCERS' names (not imported: it loads numpy, and the workers load these forms).
    reducer = forms.ChoiceField(choices=[(name, name) for name in REDUCER_NAMES], initial="mean")
