"""A run\x27s telemetry: recording it (record), the live channel and its consumer, metric keys and tiers, charts, tools, transcripts, prompts, the chart layout and the export."""
