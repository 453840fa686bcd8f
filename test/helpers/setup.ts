/*
 * Loaded by mocha before every test file (.mocharc.json `require`): the
 * test suite runs with the store's check of write declarations on
 * (src/store/declared-graphs.ts). Child processes (CLI, crash tests) inherit it.
 */
process.env.WSM_TEST_CHECK_GRAPHS ??= '1';
