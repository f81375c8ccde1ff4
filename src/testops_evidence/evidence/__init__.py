"""Evidence documents: selection, matrix plan, standing test plans and catalogs (more land here: cell
results, Allure projection, receipts). Pure functions over validated data; I/O only through safeio."""
