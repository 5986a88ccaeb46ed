# The teardown log becomes the one log: what else an entry may touch, and a time that can be given.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('core', '0001_initial'),
        ('profiles', '0014_one_live_instance_per_provider_resource'),
        ('projects', '0006_approval_webhook_is_a_channel'),
        ('runs', '0022_run_stop'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='auditentry',
            options={'ordering': ['-at', '-id'], 'verbose_name_plural': 'audit entries'},
        ),
        migrations.AddField(
            model_name='auditentry',
            name='credential',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='profiles.credential'),
        ),
        migrations.AddField(
            model_name='auditentry',
            name='project',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='projects.project'),
        ),
        migrations.AddField(
            model_name='auditentry',
            name='run',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runs.run'),
        ),
        migrations.AddField(
            model_name='auditentry',
            name='subject',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AlterField(
            model_name='auditentry',
            name='action',
            field=models.CharField(choices=[('password.issued', 'one-time password issued'), ('password.changed', 'password changed'), ('password.reset', 'password reset by mail'), ('member.added', 'member added'), ('member.removed', 'member removed'), ('role.granted', 'role granted'), ('role.revoked', 'role revoked'), ('credential.changed', 'credential registered or changed'), ('variable.changed', 'notification variable registered or changed'), ('envelope.changed', 'cost envelope changed'), ('spend.approved', 'spend approved'), ('spend.rejected', 'spend rejected'), ('run.launch_asked', 'launch asked'), ('run.stop_asked', 'stop asked'), ('run.retried', 'run retried'), ('run.gpu_waived', 'GPU held by another process: waived'), ('instance.created', 'box registered'), ('instance.edited', 'box edited'), ('instance.state_recorded', 'box state recorded by a person'), ('instance.key_pinned', 'host key pinned'), ('instance.resource_registered', 'billable resource registered'), ('filed', 'teardown filed (its proofs being gathered)'), ('requested', 'teardown requested'), ('refused', 'teardown refused'), ('approved', 'teardown approved'), ('rejected', 'teardown rejected'), ('cancelled', 'teardown cancelled'), ('expired', 'teardown expired'), ('redriven', 'teardown re-driven'), ('executing', 'teardown executing'), ('awaiting_attestation', 'teardown awaiting attestation'), ('attested', 'teardown attested'), ('provider_status', 'provider status'), ('needs_attention', 'teardown needs attention'), ('done', 'teardown done'), ('failed', 'teardown failed'), ('retried', 'teardown retried'), ('hold_placed', 'hold placed'), ('hold_retired', 'hold retired'), ('cache_cleanup', 'cache cleanup')], db_index=True, max_length=32),
        ),
        migrations.AlterField(
            model_name='auditentry',
            name='at',
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now),
        ),
    ]
