// doc_prelude_core.h: what the documentation's torch-free C++ blocks take as
// the reader's own code. Declarations only: the blocks are compiled, not run.
#ifndef SYNCLINE_TESTS_DOCS_DOC_PRELUDE_CORE_H_
#define SYNCLINE_TESTS_DOCS_DOC_PRELUDE_CORE_H_
#endif  // SYNCLINE_TESTS_DOCS_DOC_PRELUDE_CORE_H_
