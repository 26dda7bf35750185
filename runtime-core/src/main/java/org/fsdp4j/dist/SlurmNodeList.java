// Slurm's compressed host lists ("gpu[01-04,07]", "a[1-2]-ib,b3", "rack[1-2]-node[01-04]") read
// without scontrol: the master of a Slurm job is the first host of SLURM_JOB_NODELIST. Numbers
// keep their zero padding, as Slurm writes host names.
package org.fsdp4j.dist;

import java.util.ArrayList;
import java.util.List;

public final class SlurmNodeList {

    private SlurmNodeList() {
    }

    /** The first host of {@code list}; IllegalArgumentException naming the problem if it is not a host list. */
    public static String firstHost(String list) {
        List<String> items = topLevelItems(list);
        String first = items.get(0);
        StringBuilder host = new StringBuilder();
        int i = 0;
        while (i < first.length()) {
            char c = first.charAt(i);
            if (c != '[') {
                host.append(c);
                i++;
                continue;
            }
            int close = first.indexOf(']', i);
            String ranges = first.substring(i + 1, close);
            String range = ranges.split(",", -1)[0];
            String start = range.split("-", -1)[0];
            if (start.isEmpty() || !start.chars().allMatch(Character::isDigit)) {
                throw bad(list, "'" + range + "' is not a number or a range of numbers");
            }
            host.append(start);
            i = close + 1;
        }
        return host.toString();
    }

    /** The comma-separated items outside brackets, each checked for balanced brackets and non-empty. */
    private static List<String> topLevelItems(String list) {
        if (list == null || list.isBlank()) {
            throw bad(list, "it is empty");
        }
        List<String> items = new ArrayList<>();
        int depth = 0;
        int start = 0;
        for (int i = 0; i < list.length(); i++) {
            char c = list.charAt(i);
            if (c == '[') {
                if (depth++ > 0) {
                    throw bad(list, "brackets nest at position " + i);
                }
            } else if (c == ']') {
                if (--depth < 0) {
                    throw bad(list, "']' without '[' at position " + i);
                }
            } else if (c == ',' && depth == 0) {
                items.add(list.substring(start, i).trim());
                start = i + 1;
            } else if (Character.isWhitespace(c)) {
                throw bad(list, "it contains white space");
            }
        }
        if (depth != 0) {
            throw bad(list, "a '[' is not closed");
        }
        items.add(list.substring(start).trim());
        for (String item : items) {
            if (item.isEmpty() || item.startsWith("[")) {
                throw bad(list, "an item has no host name");
            }
            for (int i = item.indexOf('['); i >= 0; i = item.indexOf('[', i + 1)) {
                String ranges = item.substring(i + 1, item.indexOf(']', i));
                for (String range : ranges.split(",", -1)) {
                    if (!range.matches("\\d+(-\\d+)?")) {
                        throw bad(list, "'" + range + "' is not a number or a range of numbers");
                    }
                }
            }
        }
        return items;
    }

    private static IllegalArgumentException bad(String list, String why) {
        return new IllegalArgumentException("SLURM_JOB_NODELIST '" + list + "' is not a Slurm host list (" + why
                + "): set MASTER_ADDR or --master-addr to the first node's address");
    }
}
