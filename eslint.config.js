// ESLint flat config: type-aware rules through typescript-eslint's project
// service, which picks the nearest tsconfig.json for each file (the root one
// for src/, test/, bench/, scripts/; console/tsconfig.json for the console).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['node_modules/**', 'data/**', 'eslint.config.js'],
  },
  {
    files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts', 'console/src/**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: {
      reportUnusedDisableDirectives: 'error',
    },
    rules: {
      // The reason this config exists: a promise nobody awaits loses its
      // error (an unhandled rejection) and its ordering. Fire-and-forget
      // is written `void promise`, with its errors handled and a comment
      // saying why nobody waits for it.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': ['error', {
        // The journal's queue holds record bytes that are either ready or
        // still being encoded (Buffer | Promise<Buffer>); Promise.all over
        // such a mix is the point, not a mistake.
        allowMixedPromiseArrays: true,
      }],
      '@typescript-eslint/no-unused-vars': ['error', {
        // Route handlers take one context object and destructure the parts
        // of it that the route's shape names (params, auth, ...), used or
        // not; interface implementations keep their parameter lists.
        args: 'none',
        // `const { owners: _owners, ...rest } = x` is how the code drops a field.
        ignoreRestSiblings: true,
      }],
      // Off: async functions without await are deliberate here. They meet
      // Promise-returning contracts (route handlers, store and registry
      // interfaces) and turn a throw into a rejection the caller handles.
      '@typescript-eslint/require-await': 'off',
      // Off: the code destructures n3's DataFactory (`const { namedNode } =
      // DataFactory`) and passes static comparators to sort(); neither uses
      // `this`, but their typings declare them as methods.
      '@typescript-eslint/unbound-method': 'off',
      // Off: a redundant assertion is harmless, and removing some 200 of
      // them across files other branches are editing would only make
      // merges harder. Worth turning on in a quiet week.
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      // Off: input validation rejects control characters on purpose
      // (names, tokens, IRIs, result cells), so regexes name them.
      'no-control-regex': 'off',
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // Off in tests and bench scripts: supertest types every response body
      // as `any`, the bench's api() helper does the same, and their job is to
      // read and assert on those bodies; typing each body first would restate
      // the contract the assertions already check.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Off in tests: chai's property assertions (`expect(x).to.be.true`,
      // `.and.not.empty`) are expressions by design.
      '@typescript-eslint/no-unused-expressions': 'off',
    },
  },
);
