"""A recipe that scores with `env_reward` (its default `result`) gets a version saying that
the term's meaning changed on OpenEnv servers written elsewhere: their episode reward is the
sum of the step rewards, negative included, where it was the best step reward floored at 0.
Its terms are unchanged; runs keep the version they trained with."""

from django.db import migrations

NOTE = (
    "envlab 2026-12: env_reward (aggregate 'result') on OpenEnv servers written elsewhere is the "
    "sum of the step rewards, negative included; it was the best step reward, floored at 0. "
    "Bundled environments and ORS score as before. Terms unchanged."
)


def _uses_result(terms):
    for term in terms or []:
        if not isinstance(term, dict):
            continue
        params = term.get("params") or {}
        if term.get("kind", "env_reward") == "env_reward" and params.get("aggregate", "result") == "result":
            return True
        if _uses_result(term.get("terms")):
            return True
    return False


def add_versions(apps, schema_editor):
    Recipe = apps.get_model("rewards", "RewardRecipe")
    Version = apps.get_model("rewards", "RewardRecipeVersion")
    for recipe in Recipe.objects.all():
        latest = Version.objects.filter(recipe=recipe, number=recipe.latest_version).first()
        if latest is None or not _uses_result(latest.terms):
            continue
        number = recipe.latest_version + 1
        Version.objects.create(recipe=recipe, number=number, terms=latest.terms, note=NOTE)
        Recipe.objects.filter(pk=recipe.pk).update(latest_version=number)


class Migration(migrations.Migration):
    dependencies = [("rewards", "0002_version_note")]

    operations = [migrations.RunPython(add_versions, migrations.RunPython.noop)]
