"""Step summaries rendered from what a phase computed: export's, the campaign's, and the status badge."""
