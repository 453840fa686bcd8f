import { EditorView, basicSetup } from 'codemirror';
import { StreamLanguage } from '@codemirror/language';
import { sparql } from '@codemirror/legacy-modes/mode/sparql';
import { turtle } from '@codemirror/legacy-modes/mode/turtle';
import { keymap } from '@codemirror/view';

/** A CodeMirror 6 editor (SPARQL or Turtle highlighting); loaded only by the pages that edit text. */
export interface Editor {
  readonly dom: HTMLElement;
  get value(): string;
  set value(text: string);
  focus(): void;
}

export function createEditor(language: 'sparql' | 'turtle', initial: string, options: { id: string; onRun?: () => void; label: string }): Editor {
  const run = options.onRun;
  const view = new EditorView({
    doc: initial,
    extensions: [
      basicSetup,
      StreamLanguage.define(language === 'sparql' ? sparql : turtle),
      EditorView.lineWrapping,
      EditorView.contentAttributes.of({ 'aria-label': options.label }),
      ...(run ? [keymap.of([{ key: 'Mod-Enter', run: () => { run(); return true; } }])] : []),
    ],
  });
  view.dom.id = options.id;
  view.dom.classList.add('editor', `lang-${language}`);
  return {
    dom: view.dom,
    get value() { return view.state.doc.toString(); },
    set value(text: string) { view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }); },
    focus: () => view.focus(),
  };
}
