package org.ldptext;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small strict JSON reader for ldp_bundle_info's output (the JDK has none, and Android's
 * org.json is not on the desktop JVM): objects become {@code Map<String, Object>} (key order kept),
 * arrays {@code List<Object>}, strings {@code String}, numbers {@code Long} (integers that fit) or
 * {@code Double}, {@code true}/{@code false} {@code Boolean}, {@code null} null.
 */
final class Json {
    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    static Object parse(String text) {
        Json p = new Json(text);
        p.space();
        Object v = p.value();
        p.space();
        if (p.i != p.s.length()) throw p.error("trailing characters");
        return v;
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("bundle info JSON: " + what + " at offset " + i);
    }

    private void space() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
            i++;
        }
    }

    private boolean literal(String word) {
        if (s.startsWith(word, i)) {
            i += word.length();
            return true;
        }
        return false;
    }

    private Object value() {
        if (i >= s.length()) throw error("unexpected end");
        char c = s.charAt(i);
        if (c == '{') return object();
        if (c == '[') return array();
        if (c == '"') return string();
        if (literal("true")) return Boolean.TRUE;
        if (literal("false")) return Boolean.FALSE;
        if (literal("null")) return null;
        if (literal("NaN")) return Double.NaN;
        if (literal("Infinity")) return Double.POSITIVE_INFINITY;
        if (literal("-Infinity")) return Double.NEGATIVE_INFINITY;
        return number();
    }

    private Map<String, Object> object() {
        Map<String, Object> m = new LinkedHashMap<String, Object>();
        i++;
        space();
        if (i < s.length() && s.charAt(i) == '}') {
            i++;
            return m;
        }
        while (true) {
            space();
            if (i >= s.length() || s.charAt(i) != '"') throw error("expected a key");
            String k = string();
            space();
            if (i >= s.length() || s.charAt(i) != ':') throw error("expected ':'");
            i++;
            space();
            m.put(k, value());
            space();
            if (i >= s.length()) throw error("unexpected end");
            char c = s.charAt(i++);
            if (c == '}') return m;
            if (c != ',') throw error("expected ',' or '}'");
        }
    }

    private List<Object> array() {
        List<Object> a = new ArrayList<Object>();
        i++;
        space();
        if (i < s.length() && s.charAt(i) == ']') {
            i++;
            return a;
        }
        while (true) {
            space();
            a.add(value());
            space();
            if (i >= s.length()) throw error("unexpected end");
            char c = s.charAt(i++);
            if (c == ']') return a;
            if (c != ',') throw error("expected ',' or ']'");
        }
    }

    private String string() {
        StringBuilder b = new StringBuilder();
        i++;
        while (true) {
            if (i >= s.length()) throw error("unterminated string");
            char c = s.charAt(i++);
            if (c == '"') return b.toString();
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (i >= s.length()) throw error("unterminated escape");
            char e = s.charAt(i++);
            switch (e) {
                case '"': b.append('"'); break;
                case '\\': b.append('\\'); break;
                case '/': b.append('/'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case 'n': b.append('\n'); break;
                case 'r': b.append('\r'); break;
                case 't': b.append('\t'); break;
                case 'u':
                    if (i + 4 > s.length()) throw error("short \\u escape");
                    try {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    } catch (NumberFormatException x) {
                        throw error("bad \\u escape");
                    }
                    i += 4;
                    break;
                default:
                    throw error("bad escape");
            }
        }
    }

    private Object number() {
        int start = i;
        boolean integral = true;
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c == '.' || c == 'e' || c == 'E') integral = false;
            else if (!(c == '-' || c == '+' || (c >= '0' && c <= '9'))) break;
            i++;
        }
        String t = s.substring(start, i);
        if (t.isEmpty()) throw error("unexpected character");
        try {
            if (integral) {
                try {
                    return Long.valueOf(t);
                } catch (NumberFormatException big) {
                    return Double.valueOf(t);
                }
            }
            return Double.valueOf(t);
        } catch (NumberFormatException x) {
            throw error("bad number");
        }
    }
}
