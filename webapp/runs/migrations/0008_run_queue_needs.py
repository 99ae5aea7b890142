"""A run's queue and needs are stored at launch (issue 18: reads never parse the config).
Existing rows get them from their stored config by the rule webapp/runs/routing.py had when
this was written, inlined so that a later change of the rule cannot rewrite history."""

from django.db import migrations, models


def _stored_needs(config):
    config = config if isinstance(config, dict) else {}
    if config.get("device") != "cuda":
        return 0, False
    generation = config.get("generation") if isinstance(config.get("generation"), dict) else {}
    vllm = generation.get("backend") == "vllm"
    managed = vllm and generation.get("vllm_mode") == "server" and not generation.get("vllm_server_base_url")
    gpus = config.get("gpus") if isinstance(config.get("gpus"), int) else 1
    return gpus + (1 if managed else 0), vllm


def forwards(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.only("id", "config").iterator(chunk_size=500):
        gpus, vllm = _stored_needs(run.config)
        queue = "train" if not gpus else f"train-{'vllm' if vllm else 'cuda'}-{gpus}"
        Run.objects.filter(pk=run.pk).update(queue=queue, needs_gpus=gpus, needs_vllm=vllm)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_rollout_seed_prompt_episode"),
    ]

    operations = [
        migrations.AddField(model_name="run", name="queue", field=models.CharField(default="train", max_length=40)),
        migrations.AddField(model_name="run", name="needs_gpus", field=models.PositiveSmallIntegerField(default=0)),
        migrations.AddField(model_name="run", name="needs_vllm", field=models.BooleanField(default=False)),
        migrations.RunPython(forwards, migrations.RunPython.noop),
    ]
