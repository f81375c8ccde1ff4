"""The second attack campaign (#14), as data for docs/security.md (standard library only: the docs generator
loads it). Each attack names the tests that reproduce it; test_hostile_round_two.py checks that they exist.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Attack:
    item: int  # the reproduction's number in issue #14
    attack: str
    where: str
    before: str  # what the main it was found on did
    now: str  # the outcome now
    tests: tuple[str, ...]  # test functions of test_hostile_round_two.py (or "module::function")


_R2 = "test_hostile_round_two.py"

ATTACKS: tuple[Attack, ...] = (
    Attack(1, "integers of 4,300+ digits (and any outside 64 bits)",
           "contracts (JSON and YAML), cell results, allure results, catalogs, ledgers, receipts, TestOps and GitHub "
           "answers",
           "`internal.error` (Python's int-string limit)",
           "the parser's own code (`contract.invalid`, `export.cell_invalid`, `export.adapter`, `selection.catalog`, "
           "`ledger.invalid`, `export.receipt`, `testops.response_invalid`, `github.response_invalid`); after a mutation "
           "`testops.uncertain`",
           ("test_1_a_huge_integer_in_a_json_contract_is_contract_invalid",
            "test_1_a_huge_integer_in_a_yaml_contract_is_contract_invalid",
            "test_1_a_huge_integer_in_a_cell_result_is_export_cell_invalid",
            "test_1_a_huge_integer_in_an_allure_result_is_export_adapter",
            "test_1_a_huge_integer_in_a_catalog_is_selection_catalog",
            "test_1_a_huge_integer_in_a_ledger_is_ledger_invalid",
            "test_1_a_huge_integer_in_a_receipt_is_export_receipt",
            "test_1_a_huge_integer_in_a_testops_answer_is_response_invalid",
            "test_1_after_a_mutation_a_huge_integer_answer_is_uncertain",
            "test_1_a_huge_integer_in_a_github_answer_is_response_invalid")),
    Attack(2, "`Retry-After` with hundreds of digits on a 429", "TestOps answers", "`internal.error`",
           "`testops.deadline` (longer than the client waits), no sleep",
           ("test_2_a_retry_after_of_hundreds_of_digits_is_a_deadline",)),
    Attack(3, "out-of-range times (`9999-12-31T23:59:59-23:59`, `0001-01-01T00:00:00+23:59`)",
           "cell results, JUnit timestamps, remote host documents", "`internal.error` (OverflowError)",
           "`export.cell_invalid` / `import.host`; a JUnit timestamp reads as none, times past 9999 `export.adapter`",
           ("test_3_an_out_of_range_time_in_a_cell_is_export_cell_invalid",
            "test_3_an_out_of_range_junit_timestamp_never_crashes_the_cell_phase",
            "test_3_an_out_of_range_time_in_a_remote_host_document_is_import_host")),
    Attack(4, "a 4 MB YAML contract of 2 million flow items (or 900,000 block items)", "the contract (guard reads it "
           "first)", "refused after 90 s and 1.2 GB (45 s, 527 MB)",
           "`contract.invalid` at the 300,001st value while reading: 0.4 s / 37 MiB and 0.8 s / 95 MiB whole process "
           "(benchmarks/yaml_load.py)",
           ("test_4_a_huge_yaml_contract_is_refused_by_the_budget_while_it_is_read",)),
    Attack(5, "Markdown/HTML in untrusted text (a backtick ends the code span)",
           "export, cell, import and refusal summaries; Allure descriptions",
           "live links, images and `</details>` in step summaries",
           "text (`md.code`, `md.text`): cmark-gfm renders the characters, no element",
           ("test_summary_injection.py::test_a_harness_message_and_a_contract_title_stay_text_in_the_export_summary",
            "test_summary_injection.py::test_a_junit_failure_message_stays_text_in_the_cell_summary",
            "test_summary_injection.py::test_a_refused_archive_entry_stays_text_in_the_import_summary",
            "test_13_a_multi_line_mode_is_shown_as_one_code_span_in_the_heading")),
    Attack(6, "a symlinked parent of the state dir (`ln -s /elsewhere ws/.testops-evidence`)",
           "every phase (the default state dir outside Actions and in the Docker action)",
           "`failure.json` and receipts written elsewhere", "`io.state_dir`; nothing written through the link",
           ("test_6_the_default_state_dir_is_not_written_through_a_linked_parent",)),
    Attack(7, "a read-only state dir", "every phase", "select wrote its selection, then `internal.error`; the "
           "re-run `io.exists`", "`io.state_dir` before the phase writes anything",
           ("test_7_a_read_only_state_dir_refuses_before_export_writes_anything",)),
    Attack(8, "a token in `testops-endpoint` (`http://u:TOKEN@host`, in the path)", "the input and the contract",
           "the token in clear in once-markers and receipts",
           "`input.testops-endpoint` / `contract.invalid`; the token in no output",
           ("test_8_13_a_bad_endpoint_input_is_refused_without_echoing_a_secret",
            "test_8_a_contract_endpoint_with_credentials_is_refused",
            "test_8_no_once_marker_or_receipt_is_written_with_a_token_in_the_endpoint")),
    Attack(9, "a file name ending in a line break (`a-result.json\\n`)", "allure-results, schema patterns",
           "matched the name pattern (`$`), the failure was skipped and the case passed",
           "`io.unsafe_path`; every pattern ends at the end of the text",
           ("test_9_an_allure_result_named_with_a_trailing_line_break_is_refused_not_skipped",
            "test_9_schema_patterns_end_at_the_end_of_the_text")),
    Attack(10, "a full disk (`ENOSPC`; here a file-size limit)", "export (results, then the receipt)",
           "`internal.error`, complete results left, the re-run refused", "`io.write_failed`; the results directory "
           "removed again, the re-run works",
           ("test_10_a_disk_that_fills_while_export_writes_its_receipt_leaves_nothing_behind",)),
    Attack(11, "`NaN`/`Infinity` and duplicate keys", "catalogs, cell results, allure results (every JSON reader)",
           "accepted (NaN written back out; duplicates last-wins)", "the parser's own code, naming line and column",
           ("test_11_nan_and_infinity_in_a_catalog_are_refused_not_written_back",
            "test_11_a_cell_with_two_dispositions_is_refused",
            "test_11_duplicate_keys_in_a_catalog_and_an_allure_result_are_refused")),
    Attack(12, "a literal `<!DOCTYPE` in a JUnit CDATA section (Surefire `system-out`)", "JUnit XML",
           "refused as a DTD: a false refusal of real files", "read (a DTD in the prolog is still refused)",
           ("test_12_a_doctype_inside_cdata_is_text_not_a_dtd", "test_12_a_dtd_in_the_prolog_is_still_refused")),
    Attack(13, "a malformed endpoint (`http://[::1`), a JSON trailing comma, several contract errors, a 3.9 MB "
           "scalar, `project-id: 12.0`, a multi-line `mode`", "inputs, contracts, summaries",
           "`internal.error`; the wrong line and Python's words; the first error only; the scalar echoed twice; "
           "accepted as \"12.0\"; a raw heading",
           "`input.testops-endpoint`; line, column and our words; every problem (up to 20) with pointer, line and "
           "column; values capped; `contract.invalid`; one code span",
           ("test_8_13_a_bad_endpoint_input_is_refused_without_echoing_a_secret",
            "test_13_a_json_trailing_comma_is_reported_where_it_is",
            "test_13_every_problem_of_a_contract_is_reported_at_once",
            "test_13_a_huge_scalar_is_not_echoed_whole", "test_13_an_id_written_as_a_float_is_refused",
            "test_13_a_multi_line_mode_is_shown_as_one_code_span_in_the_heading")),
    Attack(14, "a 270 KB `.eval` entry declaring 256 MiB (Zstandard RLE blocks under the 1000:1 ratio cap, CRC "
           "right); sixteen such journal entries (4 GiB declared)", "Inspect AI logs (cell, export)",
           "inflated whole: 534 MiB and 9 s for one entry; 1.3 GB and 26 s for four",
           "`export.log_budget` before a byte is inflated (64 MiB for the header and summaries): 0.8 s / 22 MiB "
           "and 0.7 s / 30 MiB whole process (benchmarks/zstd_decode.py)",
           ("test_hostile_framework_logs.py::test_found_a_summary_that_declares_256_mib_is_refused_before_it_is_inflated",
            "test_hostile_framework_logs.py::test_found_journal_summaries_cannot_add_up_past_the_budget")),
    Attack(15, "millions of tiny JSON values (`[{},{},...]`) in a log", "Inspect AI logs, promptfoo results, every "
           "schema-checked document", "300,000 invalid items: 125 s and 2.1 GB to report the first (jsonschema made "
           "an error object for each); a 512 MiB log would take ~14 GB to parse",
           "`export.log_budget` above 4 million values (`.eval` summaries) or 8 million (`.json`, promptfoo), "
           "counted before parsing; at most 1,000 schema errors gathered",
           ("test_hostile_framework_logs.py::test_found_millions_of_tiny_json_values_are_refused_before_they_are_parsed",
            "test_hostile_framework_logs.py::test_found_a_json_log_is_bounded_by_its_values_too",
            "test_hostile_framework_logs.py::test_found_a_schema_violation_in_every_item_is_reported_without_collecting_them_all")),
    Attack(16, "200 levels of promptfoo `componentResults` (400 of JSON, under the reader's 512)",
           "promptfoo results, every schema-checked document", "`internal.error` (RecursionError in the schema check)",
           "the caller's code (`export.adapter`): nested too deeply to be checked",
           ("test_hostile_framework_logs.py::test_found_deeply_nested_assertion_results_are_refused_not_a_crash",)),
    Attack(17, "a stored zip entry whose bytes outrun its declared size", "`.eval` archives, imported artifacts",
           "read as its declared prefix (another reader reads all of it: two documents)", "`import.unsafe_archive`",
           ("test_hostile_framework_logs.py::test_zip_tricks_are_refused_as_unsafe_archives",)),
)
