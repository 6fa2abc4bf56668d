#include "scenarios/cli/cli_docs.hpp"

#include <sstream>

#include <fmt/format.h>

namespace dpt::cli {

std::map<const CLI::Option*, std::vector<std::string>>& option_choices() {
  static std::map<const CLI::Option*, std::vector<std::string>> choices;
  return choices;
}

namespace {

// The fixed set of values an option takes: registered (with_choices), else its CLI11
// IsMember validator's set, whose description is "{a,b,c}"; empty for a free value.
std::vector<std::string> choices_of(const CLI::Option* option) {
  if (const auto it = option_choices().find(option); it != option_choices().end()) return it->second;
  auto* o = const_cast<CLI::Option*>(option);  // CLI11 hands validators out non-const only
  for (int i = 0;; ++i) {
    CLI::Validator* v = nullptr;
    try {
      v = o->get_validator(i);
    } catch (const CLI::OptionNotFound&) {
      break;
    }
    const std::string d = v->get_description();
    if (d.size() < 3 || d.front() != '{' || d.back() != '}') continue;
    std::vector<std::string> values;
    std::string cur;
    for (char c : d.substr(1, d.size() - 2)) {
      if (c == ',') {
        values.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    values.push_back(cur);
    return values;
  }
  return {};
}

// "--strategy:single,dp,ddp" for each option of `app` with a fixed set of values (one
// word per spelling, for the bash script's `choices`).
std::vector<std::string> choice_words(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    const auto choices = choices_of(o);
    if (choices.empty() || !o->nonpositional()) continue;
    std::string values;
    for (const auto& v : choices) values += (values.empty() ? "" : ",") + v;
    for (const auto& l : o->get_lnames()) out.push_back("--" + l + ":" + values);
    for (const auto& s : o->get_snames()) out.push_back("-" + s + ":" + values);
  }
  return out;
}

std::vector<const CLI::App*> subcommands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

// Every spelling of the named (non-positional) options, e.g. "-o --out --json --help".
std::vector<std::string> option_words(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::Option* o : app.get_options()) {
    for (const auto& s : o->get_snames()) words.push_back("-" + s);
    for (const auto& l : o->get_lnames()) words.push_back("--" + l);
  }
  return words;
}

// Flags are defined with expected(0): they take no value.
bool takes_value(const CLI::Option* o) { return o->get_expected_max() > 0 && o->get_type_size_max() > 0; }

std::string join(const std::vector<std::string>& v, const std::string& sep = " ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

// The first sentence of a description, for one-line menus.
std::string first_sentence(std::string s) {
  const auto dot = s.find(". ");
  if (dot != std::string::npos) s = s.substr(0, dot);
  int depth = 0;  // a colon inside parentheses does not end the phrase
  for (std::size_t i = 0; i + 1 < s.size(); ++i) {
    depth += s[i] == '(' ? 1 : s[i] == ')' ? -1 : 0;
    if (depth == 0 && i > 20 && s[i] == ':' && s[i + 1] == ' ') {
      s = s.substr(0, i);
      break;
    }
  }
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// Options whose value is a name from the library rather than a file.
bool is_hardware_option(const CLI::Option* o) { return o->check_lname("hardware"); }
bool is_model_option(const CLI::Option* o) { return o->check_lname("model"); }

void bash_case(std::ostringstream& out, const std::string& path, const CLI::App& app) {
  std::vector<std::string> words = option_words(app);
  for (const CLI::App* s : subcommands(app)) words.push_back(s->get_name());
  std::vector<std::string> valued;
  for (const CLI::Option* o : app.get_options())
    if (o->nonpositional() && takes_value(o) && !is_hardware_option(o) && !is_model_option(o))
    {
      for (const auto& l : o->get_lnames()) valued.push_back("--" + l);
      // -o FILE, -j N: a short name takes its value too (`-o <TAB>` offered the commands' words).
      for (const auto& s : o->get_snames()) valued.push_back("-" + s);
    }
  out << fmt::format("    '{}') words='{}'; valued='{}'; choices='{}' ;;\n", path, join(words), join(valued),
                     join(choice_words(app)));
  for (const CLI::App* s : subcommands(app)) bash_case(out, path.empty() ? s->get_name() : path + " " + s->get_name(), *s);
}

std::string zsh_quote(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else if (c == '[') out += '(';
    else if (c == ']') out += ')';
    else if (c == ':') out += "\\:";
    else out += c;
  }
  return out;
}

void zsh_function(std::ostringstream& out, const std::string& fn, const CLI::App& app) {
  const auto subs = subcommands(app);
  out << fn << "() {\n  local state line\n  _arguments -C \\\n";
  for (const CLI::Option* o : app.get_options()) {
    if (!o->nonpositional()) continue;
    std::vector<std::string> names;
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    const std::string desc = zsh_quote(first_sentence(o->get_description()));
    std::string action;
    if (takes_value(o)) {
      const auto choices = choices_of(o);
      action = is_hardware_option(o) ? ":hardware:_dptwin_hardware"
               : is_model_option(o)  ? ":model:_dptwin_models"
               : !choices.empty()    ? ":value:(" + join(choices) + ")"
                                     : ":value:_files";
    }
    // -o,--out is written {-o,--out}'[...]' (zsh's brace expansion), --json as '--json[...]'.
    const std::string spec = names.size() > 1 ? "{" + join(names, ",") + "}'" : "'" + names.front();
    out << fmt::format("    {}[{}]{}' \\\n", spec, desc, action);
  }
  if (subs.empty()) {
    out << "    '*:file:_files'\n}\n\n";
    return;
  }
  out << "    '1: :->command' '*:: :->args'\n  case $state in\n    command)\n      local -a commands\n"
      << "      commands=(\n";
  for (const CLI::App* s : subs)
    out << fmt::format("        '{}:{}'\n", s->get_name(), zsh_quote(first_sentence(s->get_description())));
  out << "      )\n      _describe 'command' commands ;;\n    args)\n      case $line[1] in\n";
  for (const CLI::App* s : subs) out << fmt::format("        {}) {}_{} ;;\n", s->get_name(), fn, s->get_name());
  out << "      esac ;;\n  esac\n}\n\n";
  for (const CLI::App* s : subs) zsh_function(out, fn + "_" + s->get_name(), *s);
}

// roff escapes: backslashes, hyphens that are minus signs in options, and a
// leading dot or quote that would read as a request.
std::string roff(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out = "\\&" + out;
  return out;
}

// Text with embedded newlines (footers): one roff line per source line, kept as is.
void roff_block(std::ostringstream& out, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  out << ".nf\n";
  while (std::getline(in, line)) out << roff(line) << "\n";
  out << ".fi\n";
}

void man_command(std::ostringstream& out, const std::string& path, const CLI::App& app) {
  out << ".SS \"" << roff(path) << "\"\n" << roff(app.get_description()) << "\n";
  for (const CLI::Option* o : app.get_options()) {
    if (o->get_lnames() == std::vector<std::string>{"help"}) continue;
    std::string name = o->nonpositional() ? "" : roff(o->get_name(true));
    if (o->nonpositional()) {
      std::vector<std::string> names;
      for (const auto& s : o->get_snames()) names.push_back("\\fB\\-" + roff(s) + "\\fR");
      for (const auto& l : o->get_lnames()) names.push_back("\\fB\\-\\-" + roff(l) + "\\fR");
      name = join(names, ", ");
      if (takes_value(o)) name += " \\fI" + roff(o->get_option_text().empty() ? "VALUE" : o->get_option_text()) + "\\fR";
    } else {
      name = "\\fI" + name + "\\fR";
    }
    out << ".TP\n" << name << "\n" << roff(o->get_description());
    if (!o->get_default_str().empty()) out << " (default: " << roff(o->get_default_str()) << ")";
    out << "\n";
  }
  if (!app.get_footer().empty()) {
    out << ".PP\n";
    roff_block(out, app.get_footer());
  }
  for (const CLI::App* s : subcommands(app)) man_command(out, path + " " + s->get_name(), *s);
}

}  // namespace

std::string bash_completion(const CLI::App& root, const std::vector<std::string>& hardware_names,
                            const std::vector<std::string>& model_names) {
  std::ostringstream out;
  out << "# bash completion for dptwin (generated by `dptwin completion bash` from its flag table)\n"
      << "_dptwin() {\n"
      << "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" path=\"\" i w words valued choices c\n"
      << "  # The command path so far: the words that are not options nor option values.\n"
      << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      << "    w=\"${COMP_WORDS[i]}\"\n"
      << "    case \"$w\" in -*) continue ;; esac\n"
      << "    case \" $valued \" in *\" ${COMP_WORDS[i-1]} \"*) continue ;; esac\n"
      << "    case \"${COMP_WORDS[i-1]}\" in --hardware|--model) continue ;; esac\n"
      << "    _dptwin_words \"${path:+$path }$w\" && path=\"${path:+$path }$w\"\n"
      << "  done\n"
      << "  _dptwin_words \"$path\"\n"
      << "  # The NAME of `hardware show` and `model show`: the library's names, or a file.\n"
      << "  if [[ \"$cur\" != -* && \"$prev\" == show ]]; then\n"
      << "    case \"$path\" in\n"
      << "      'hardware show') COMPREPLY=($(compgen -W '" << join(hardware_names) << "' -- \"$cur\")) ;;\n"
      << "      'model show') COMPREPLY=($(compgen -W '" << join(model_names) << "' -- \"$cur\")) ;;\n"
      << "      *) COMPREPLY=() ;;\n"
      << "    esac\n"
      << "    if [[ \"$path\" == 'hardware show' || \"$path\" == 'model show' ]]; then\n"
      << "      compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -f -- \"$cur\")); return\n"
      << "    fi\n"
      << "  fi\n"
      << "  case \"$prev\" in\n"
      << "    --hardware) COMPREPLY=($(compgen -W '" << join(hardware_names) << "' -- \"$cur\")); "
      << "compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -f -- \"$cur\")); return ;;\n"
      << "    --model) COMPREPLY=($(compgen -W '" << join(model_names) << "' -- \"$cur\")); "
      << "compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -f -- \"$cur\")); return ;;\n"
      << "  esac\n"
      << "  # An option whose values are a fixed set: those values.\n"
      << "  for c in $choices; do\n"
      << "    if [[ \"${c%%:*}\" == \"$prev\" ]]; then c=\"${c#*:}\"; COMPREPLY=($(compgen -W \"${c//,/ }\" -- \"$cur\")); return; fi\n"
      << "  done\n"
      << "  if [[ -n \"$prev\" && \" $valued \" == *\" $prev \"* ]]; then\n"
      << "    compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")); return\n"
      << "  fi\n"
      << "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
      << "  if [[ \"$cur\" != -* ]]; then compopt -o filenames 2>/dev/null; COMPREPLY+=($(compgen -f -- \"$cur\")); fi\n"
      << "}\n"
      << "# Sets words (options and subcommands) and valued (options taking a value) for a\n"
      << "# command path; fails for a path that is not a command.\n"
      << "_dptwin_words() {\n  case \"$1\" in\n";
  bash_case(out, "", root);
  out << "    *) return 1 ;;\n  esac\n}\ncomplete -F _dptwin dptwin\n";
  return out.str();
}

std::string zsh_completion(const CLI::App& root, const std::vector<std::string>& hardware_names,
                           const std::vector<std::string>& model_names) {
  std::ostringstream out;
  out << "#compdef dptwin\n# zsh completion for dptwin (generated by `dptwin completion zsh` from its flag table)\n\n"
      << "_dptwin_hardware() { _alternative 'names:hardware:(" << join(hardware_names) << ")' 'files:file:_files' }\n"
      << "_dptwin_models() { _alternative 'names:model:(" << join(model_names) << ")' 'files:file:_files' }\n\n";
  zsh_function(out, "_dptwin", root);
  out << "_dptwin \"$@\"\n";
  return out.str();
}

std::string man_page(const CLI::App& root, const std::string& version) {
  std::ostringstream out;
  out << ".\\\" Generated by `dptwin man` from the command line's own flag table.\n"
      << ".TH DPTWIN 1 \"\" \"" << roff(version) << "\" \"User Commands\"\n"
      << ".SH NAME\ndptwin \\- data\\-parallel training (DataParallel and DDP) on host, CUDA or a SimGrid twin\n"
      << ".SH SYNOPSIS\n\\fBdptwin\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n.br\n\\fBdptwin \\-\\-version\\fR\n"
      << ".SH DESCRIPTION\n" << roff(root.get_description()) << "\n.PP\nCommands:";
  for (const CLI::App* s : subcommands(root)) out << " \\fB" << roff(s->get_name()) << "\\fR";
  out << ".\n.SH COMMANDS\n";
  for (const CLI::App* s : subcommands(root)) man_command(out, "dptwin " + s->get_name(), *s);
  out << ".SH EXIT STATUS\n"
      << ".TP\n0\nsuccess\n.TP\n1\na check or target failed (a verify check, out of memory, a target not met)\n"
      << ".TP\n2\nbad flags or input files (the error names the flag, file, line or key); nothing was run\n"
      << ".TP\n3\nthe run itself failed (I/O, a collective error)\n"
      << ".TP\n130, 143\nstopped by SIGINT or SIGTERM\n"
      << ".SH ENVIRONMENT\n.TP\nDPTWIN_SCENARIOS_DIR\n"
      << "the scenario library (hardware/, models/, whatif/, lesson/, faults/); by default the installed "
      << "share/dptwin/scenarios beside the binary, else the source tree it was built from\n"
      << ".TP\nDPTWIN_SIM_WALL_S, DPTWIN_SIM_EVENTS\nwall\\-clock and event budgets of one prediction\n"
      << ".SH SEE ALSO\nnccl\\-tests(1), sbatch(1)\n";
  return out.str();
}

}  // namespace dpt::cli
